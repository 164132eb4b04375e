// Joining a TCP bootstrap: the unique id, the root's hello and its table.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/tcp_root.hpp"
#include "bootstrap/unique_id.hpp"
#include "core/env.hpp"
#include "core/hash.hpp"
#include "tessera/version.h"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;

// A root that refuses connections this long has exited (ranks usually start within
// milliseconds of each other, and the root listens before the id exists).
constexpr double kRefusedPatienceSeconds = 2.0;

// Closes its descriptor unless released.
struct FdGuard {
  int fd = -1;
  ~FdGuard() { closeFd(&fd); }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

const char* ioWhy(Io io, int err) {
  switch (io) {
    case Io::kEof: return "the connection was closed";
    case Io::kTimeout: return "timed out";
    case Io::kWoken: return "interrupted";
    default: return std::strerror(err);
  }
}

// rootAtRank0 (TESSERA_COMM_ID): nothing listens until rank 0 joins, which may be long after
// this rank, so refusals are waited out until the deadline.
Result connectRoot(const SocketAddress& root, const Deadline& deadline, int cancelFd,
                   const char* me, bool rootAtRank0, int* fd) {
  Clock::time_point firstRefusal{};
  bool refused = false;
  for (;;) {
    int err = 0;
    Io io = connectWithin(root, deadline, cancelFd, fd, &err);
    if (io == Io::kOk) return tsrSuccess;
    if (io == Io::kWoken)
      return TSR_FAIL(tsrRemoteError, "%s: cancelled while connecting to the bootstrap root at %s",
                      me, root.str().c_str());
    if (io == Io::kTimeout)
      return TSR_FAIL(tsrTimeout, "%s: connecting to the bootstrap root at %s timed out after %g s",
                      me, root.str().c_str(), deadline.seconds());
    if (err != ECONNREFUSED)
      return TSR_FAIL(tsrRemoteError, "%s: cannot connect to the bootstrap root at %s: %s", me,
                      root.str().c_str(), std::strerror(err));
    auto now = Clock::now();
    if (!refused) firstRefusal = now, refused = true;
    double refusedFor = std::chrono::duration<double>(now - firstRefusal).count();
    if (rootAtRank0 && deadline.remainingSeconds() < 0.05)
      return TSR_FAIL(tsrTimeout,
                      "%s: nothing listened at %s for %.1f s: rank 0 starts the bootstrap root "
                      "there (TESSERA_COMM_ID / NCCL_COMM_ID) when it joins; did it?",
                      me, root.str().c_str(), refusedFor);
    if (!rootAtRank0 &&
        (refusedFor >= kRefusedPatienceSeconds || deadline.remainingSeconds() < 0.05))
      return TSR_FAIL(tsrRemoteError,
                      "%s: nothing listens at %s, the bootstrap root of this unique id (refused "
                      "for %.1f s): the process that created the id exited, or a complete set "
                      "of ranks already used the id",
                      me, root.str().c_str(), refusedFor);
    if (cancelFd >= 0) {
      int ignored = 0;
      if (waitFd(cancelFd, POLLIN, Deadline::after(0.05), -1, &ignored) == Io::kOk)
        return TSR_FAIL(tsrRemoteError,
                        "%s: cancelled while connecting to the bootstrap root at %s", me,
                        root.str().c_str());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace

Result createUserUniqueId(tsrUniqueId* id) {
  if (id == nullptr) return TSR_FAIL(tsrInvalidArgument, "createUserUniqueId: null id pointer");
  std::string commId;
  TSR_CHECK(envString("TESSERA_COMM_ID", &commId));
  if (commId.empty()) return createUniqueId(id);
  const char* var = envSourceName("TESSERA_COMM_ID");
  UniqueIdContents contents;
  std::string why;
  if (!resolveHostPort(commId, &contents.root, &why))
    return TSR_FAIL(tsrInvalidArgument, "%s=%s: %s", var, commId.c_str(), why.c_str());
  contents.version = TESSERA_VERSION_CODE;
  // Every process that calls this must make the same id without talking to the others: the
  // nonce comes from the value, not from chance.
  contents.nonce = fnv1a64(commId.data(), commId.size());
  if (contents.nonce == 0) contents.nonce = 1;
  contents.rootAtRank0 = true;
  TSR_INFO("unique id from %s=%s: root %s, started by rank 0 when it joins", var, commId.c_str(),
           contents.root.str().c_str());
  encodeUniqueId(contents, id);
  return tsrSuccess;
}

Result createUniqueId(tsrUniqueId* id) {
  if (id == nullptr) return TSR_FAIL(tsrInvalidArgument, "createUniqueId: null id pointer");
  SocketAddress address;
  std::string ifname;
  TSR_CHECK(pickBootstrapAddress(&address, &ifname));
  UniqueIdContents contents;
  contents.version = TESSERA_VERSION_CODE;
  contents.nonce = randomNonce64();
  // The root waits for its first rank as long as a rank would wait for it.
  double idle = 0;
  TSR_CHECK(resolveBootstrapTimeout(BootstrapOptions{}, &idle));
  TSR_CHECK(startTcpRoot(address, contents.nonce, contents.version, idle, &contents.root));
  TSR_INFO("unique id: root %s on interface %s", contents.root.str().c_str(), ifname.c_str());
  encodeUniqueId(contents, id);
  return tsrSuccess;
}

Result TcpBootstrap::create(const tsrUniqueId& id, int rank, int nranks,
                            const BootstrapOptions& options, std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "tcp bootstrap: null output pointer");
  if (nranks < 1 || nranks > kMaxBootstrapRanks || rank < 0 || rank >= nranks)
    return TSR_FAIL(tsrInvalidArgument, "tcp bootstrap: rank %d of %d ranks is not a valid rank",
                    rank, nranks);
  std::string me = strprintf("tcp bootstrap, rank %d of %d", rank, nranks);
  UniqueIdContents contents;
  if (Result r = decodeUniqueId(id, &contents); r != tsrSuccess)
    return addContext(r, "%s", me.c_str());
  double timeout = 0;
  TSR_CHECK(resolveBootstrapTimeout(options, &timeout));
  Deadline deadline = Deadline::after(timeout);
  const std::string root = contents.root.str();

  if (contents.rootAtRank0 && rank == 0) {
    // TESSERA_COMM_ID: the id was made without a root; rank 0 runs it, here, for as long as a
    // rank waits. The previous communicator's root at this address stopped listening before
    // its ranks got their table, so the port is free again (listenOn sets SO_REUSEADDR).
    SocketAddress bound;
    if (Result r = startTcpRoot(contents.root, contents.nonce, contents.version, timeout, &bound);
        r != tsrSuccess)
      return addContext(r, "%s: starting the bootstrap root at %s (TESSERA_COMM_ID / NCCL_COMM_ID)",
                        me.c_str(), root.c_str());
  }
  FdGuard rootFd;
  const int cancelFd = options.cancelFd;
  TSR_CHECK(
      connectRoot(contents.root, deadline, cancelFd, me.c_str(), contents.rootAtRank0, &rootFd.fd));
  // Peers reach this rank on the interface that reaches the root.
  SocketAddress local, listening;
  if (!localAddress(rootFd.fd, &local))
    return TSR_FAIL(tsrSystemError, "%s: getsockname failed: %s", me.c_str(), std::strerror(errno));
  local.setPort(0);
  FdGuard listenFd;
  TSR_CHECK(listenOn(local, &listenFd.fd, &listening));

  RootHello hello{};
  hello.magic = kRootHelloMagic;
  hello.protocol = kTcpProtocol;
  hello.version = options.helloVersionOverride != 0
                      ? static_cast<uint32_t>(options.helloVersionOverride)
                      : static_cast<uint32_t>(TESSERA_VERSION_CODE);
  hello.rank = rank;
  hello.nranks = nranks;
  hello.timeoutMs = static_cast<uint32_t>(std::min<double>(deadline.remainingMs(), UINT32_MAX));
  hello.nonce = contents.nonce;
  encodeAddress(listening, hello.address);
  int err = 0;
  Io io = writeFull(rootFd.fd, &hello, sizeof(hello), deadline, cancelFd, &err);
  RootReply reply{};
  if (io == Io::kOk) io = waitFd(rootFd.fd, POLLIN, deadline, cancelFd, &err);
  // The root answers a little before this rank's deadline, naming the ranks that are missing;
  // on a loaded machine it may be late, so give it a moment more to explain.
  if (io == Io::kTimeout)
    io = waitFd(rootFd.fd, POLLIN, Deadline::after(std::min(1.0, timeout / 4)), cancelFd, &err);
  if (io == Io::kOk)
    io = readFull(rootFd.fd, &reply, sizeof(reply),
                  Deadline::after(std::max(deadline.remainingSeconds(), 1.0)), cancelFd, &err);
  if (io == Io::kWoken)
    return TSR_FAIL(tsrRemoteError, "%s: cancelled while waiting for the bootstrap root at %s",
                    me.c_str(), root.c_str());
  if (io == Io::kTimeout)
    return TSR_FAIL(tsrTimeout,
                    "%s: waited %g s for the bootstrap root at %s to gather all %d "
                    "ranks",
                    me.c_str(), timeout, root.c_str(), nranks);
  if (io != Io::kOk)
    return TSR_FAIL(tsrRemoteError,
                    "%s: the bootstrap root at %s failed before answering (%s): "
                    "did the process that created the unique id exit?",
                    me.c_str(), root.c_str(), ioWhy(io, err));
  if (reply.magic != kRootReplyMagic)
    return TSR_FAIL(tsrRemoteError, "%s: %s is not a tessera bootstrap root (bad reply)",
                    me.c_str(), root.c_str());

  if (reply.status != kRootOk) {
    std::string text(std::min<uint32_t>(reply.textBytes, 1 << 16), '\0');
    io = readFull(rootFd.fd, text.data(), text.size(), Deadline::after(2.0), -1, &err);
    if (io != Io::kOk) text = "(the root's explanation was cut off)";
    Result code = reply.status == kRootRejected  ? tsrInvalidArgument
                  : reply.status == kRootTimeout ? tsrTimeout
                                                 : tsrRemoteError;
    return TSR_FAIL(code, "%s: %s", me.c_str(), text.c_str());
  }
  if (reply.nranks != nranks)
    return TSR_FAIL(tsrInternalError, "%s: the root sent a table of %d ranks", me.c_str(),
                    reply.nranks);
  std::vector<uint8_t> table(static_cast<size_t>(nranks) * kWireAddressBytes);
  io = readFull(rootFd.fd, table.data(), table.size(), deadline, cancelFd, &err);
  if (io != Io::kOk)
    return TSR_FAIL(io == Io::kTimeout ? tsrTimeout : tsrRemoteError,
                    "%s: receiving the rank table from the root at %s failed: %s", me.c_str(),
                    root.c_str(), ioWhy(io, err));
  std::vector<SocketAddress> peers(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    if (!decodeAddress(table.data() + static_cast<size_t>(r) * kWireAddressBytes,
                       &peers[static_cast<size_t>(r)]))
      return TSR_FAIL(tsrRemoteError, "%s: the root's table holds no valid address for rank %d",
                      me.c_str(), r);

  int wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd < 0)
    return TSR_FAIL(tsrSystemError, "%s: eventfd failed: %s", me.c_str(), std::strerror(errno));
  out->reset(new TcpBootstrap(rank, nranks, timeout, contents.nonce, listenFd.release(), wakeFd,
                              std::move(peers)));
  TSR_INFO("%s joined (root %s, listening on %s)", me.c_str(), root.c_str(),
           listening.str().c_str());
  return tsrSuccess;
}

}  // namespace tessera
