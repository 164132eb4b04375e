#include "bootstrap/tcp_root.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/tcp_wire.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;

// A connection that has not sent a full hello after this long is dropped (not one of ours).
constexpr auto kHelloPatience = std::chrono::seconds(30);

struct Pending {
  int fd = -1;
  RootHello hello{};
  size_t got = 0;
  Clock::time_point since;
};

struct RootState {
  int listenFd = -1;
  uint64_t nonce = 0;
  uint32_t version = 0;
  std::string address;
  std::vector<Pending> pending;
  int nranks = 0;  // fixed by the first accepted hello
  int firstRank = -1;
  std::vector<int> rankFd;
  std::vector<std::array<uint8_t, kWireAddressBytes>> rankAddress;
  int arrived = 0;
  bool haveDeadline = false;  // set by the first hello
  Clock::time_point deadline;
  Clock::time_point idleUntil;  // while no hello has come
  double waitSeconds = 0;
  std::string failure;  // non-empty once the communicator cannot form
};

void reply(int fd, RootStatus status, int nranks, const std::string& text) {
  RootReply r{kRootReplyMagic, status, nranks, static_cast<uint32_t>(text.size())};
  std::string bytes(reinterpret_cast<const char*>(&r), sizeof(r));
  bytes += text;
  int err = 0;
  // A rank that stopped reading is not waited for long: it is failing anyway.
  writeFull(fd, bytes.data(), bytes.size(), Deadline::after(2.0), -1, &err);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 32; ++i)
    s += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  if (ranks.size() > 32) s += strprintf(" and %zu more", ranks.size() - 32);
  return s;
}

// Every rank that arrived hears `text`; their connections close.
void tellArrived(RootState& s, RootStatus status, const std::string& text) {
  for (int& fd : s.rankFd)
    if (fd >= 0) {
      reply(fd, status, s.nranks, text);
      closeFd(&fd);
    }
  s.arrived = 0;
}

void reject(RootState& s, int fd, const std::string& why) {
  reply(fd, kRootRejected, s.nranks, "the bootstrap root refused this rank: " + why);
  s.failure =
      strprintf("the bootstrap root at %s gave up because %s", s.address.c_str(), why.c_str());
  tellArrived(s, kRootFailed, s.failure);
}

void onHello(RootState& s, int fd, const RootHello& h) {
  if (h.magic != kRootHelloMagic) return;  // not a tessera rank: ignore it
  // The root gives up a little before the earliest rank would, so that rank still hears which
  // ranks were missing.
  auto now = Clock::now();
  auto margin = std::chrono::milliseconds(std::min<uint32_t>(1000, h.timeoutMs / 5));
  auto giveUp = now + std::chrono::milliseconds(h.timeoutMs) - margin;
  if (!s.haveDeadline || giveUp < s.deadline) {
    s.deadline = giveUp;
    s.waitSeconds = (h.timeoutMs - static_cast<double>(margin.count())) / 1000.0;
  }
  s.haveDeadline = true;

  if (h.nonce != s.nonce) {
    // Not a rank of this communicator (another job's rank reaching a reused port, an old id):
    // refuse that connection alone; the ranks of this communicator are not its concern.
    return reply(fd, kRootRejected, s.nranks,
                 strprintf("the bootstrap root at %s serves another unique id (nonce %016llx, "
                           "this rank presented %016llx)",
                           s.address.c_str(), static_cast<unsigned long long>(s.nonce),
                           static_cast<unsigned long long>(h.nonce)));
  }
  if (!s.failure.empty()) return reply(fd, kRootFailed, s.nranks, s.failure);
  if (h.protocol != kTcpProtocol)
    return reject(s, fd,
                  strprintf("rank %d speaks bootstrap protocol %u but the root speaks %u", h.rank,
                            h.protocol, kTcpProtocol));
  if (h.version != s.version)
    return reject(s, fd,
                  strprintf("rank %d runs tessera version %u but the root (the process that "
                            "created the unique id) runs version %u",
                            h.rank, h.version, s.version));
  if (h.nranks < 1 || h.nranks > kMaxBootstrapRanks)
    return reject(s, fd,
                  strprintf("rank %d says there are %d ranks (at most %d are supported)", h.rank,
                            h.nranks, kMaxBootstrapRanks));
  if (s.nranks == 0) {
    s.nranks = h.nranks;
    s.firstRank = h.rank;
    s.rankFd.assign(static_cast<size_t>(h.nranks), -1);
    s.rankAddress.resize(static_cast<size_t>(h.nranks));
  } else if (h.nranks != s.nranks) {
    return reject(s, fd,
                  strprintf("rank %d says there are %d ranks but rank %d said %d", h.rank, h.nranks,
                            s.firstRank, s.nranks));
  }
  if (h.rank < 0 || h.rank >= s.nranks)
    return reject(s, fd, strprintf("a rank says it is rank %d of %d", h.rank, s.nranks));
  if (s.rankFd[static_cast<size_t>(h.rank)] >= 0)
    return reject(s, fd, strprintf("two ranks say they are rank %d", h.rank));
  auto& slot = s.rankAddress[static_cast<size_t>(h.rank)];
  std::memcpy(slot.data(), h.address, kWireAddressBytes);
  s.rankFd[static_cast<size_t>(h.rank)] = fd;
  ++s.arrived;
}

void sendTable(RootState& s) {
  std::string table;
  for (const auto& a : s.rankAddress)
    table.append(reinterpret_cast<const char*>(a.data()), a.size());
  for (int& fd : s.rankFd) {
    RootReply r{kRootReplyMagic, kRootOk, s.nranks, 0};
    std::string bytes(reinterpret_cast<const char*>(&r), sizeof(r));
    bytes += table;
    int err = 0;
    writeFull(fd, bytes.data(), bytes.size(), Deadline::after(5.0), -1, &err);
    closeFd(&fd);
  }
}

void timedOut(RootState& s) {
  if (!s.failure.empty()) return;  // the ranks already heard why
  std::vector<int> missing, joined;
  for (int r = 0; r < s.nranks; ++r)
    (s.rankFd[static_cast<size_t>(r)] >= 0 ? joined : missing).push_back(r);
  tellArrived(s, kRootTimeout,
              strprintf("rank(s) %s of %d did not reach the bootstrap root at %s within %g s of "
                        "the first rank (ranks that did: %s)",
                        rankList(missing).c_str(), s.nranks, s.address.c_str(), s.waitSeconds,
                        rankList(joined).c_str()));
}

void acceptAll(RootState& s) {
  for (;;) {
    int fd = ::accept4(s.listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      // Out of descriptors: the listening socket stays readable, so pause rather than spin.
      if (errno == EMFILE || errno == ENFILE)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;  // EAGAIN, or a transient error: the next poll retries
    }
    s.pending.push_back(Pending{fd, RootHello{}, 0, Clock::now()});
  }
}

void readHellos(RootState& s, const std::vector<pollfd>& polled) {
  std::vector<Pending> still;
  for (size_t i = 0; i < s.pending.size(); ++i) {
    Pending& p = s.pending[i];
    if (i + 1 < polled.size() && polled[i + 1].revents != 0) {
      size_t got = 0;
      int err = 0;
      Io io = readSome(p.fd, reinterpret_cast<uint8_t*>(&p.hello) + p.got,
                       sizeof(RootHello) - p.got, &got, &err);
      p.got += got;
      if (io != Io::kOk) {
        closeFd(&p.fd);
        continue;
      }
      if (p.got == sizeof(RootHello)) {
        int fd = p.fd;
        onHello(s, fd, p.hello);
        bool kept = false;
        for (int f : s.rankFd) kept = kept || f == fd;
        if (!kept) ::close(fd);
        continue;
      }
    }
    if (Clock::now() - p.since > kHelloPatience) {
      closeFd(&p.fd);
      continue;
    }
    still.push_back(p);
  }
  s.pending.swap(still);
}

void serve(RootState& s) {
  for (;;) {
    if (s.failure.empty() && s.nranks > 0 && s.arrived == s.nranks) {
      // Stop listening before any rank has its table: with a fixed address (TESSERA_COMM_ID)
      // the ranks' next communicator uses this port, and its ranks must be refused (they retry)
      // until its own root listens, not queued here, nor keep its rank 0 from listening.
      closeFd(&s.listenFd);
      sendTable(s);
      break;
    }
    auto now = Clock::now();
    if (s.haveDeadline && now >= s.deadline) {
      timedOut(s);
      break;
    }
    if (!s.haveDeadline && now >= s.idleUntil) {
      TSR_INFO("bootstrap root at %s: no rank came; the root exits", s.address.c_str());
      break;
    }
    int waitMs = -1;
    auto limit = [&](Clock::time_point t) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1;
      ms = std::max<int64_t>(0, std::min<int64_t>(ms, INT32_MAX));
      waitMs = waitMs < 0 ? static_cast<int>(ms) : std::min(waitMs, static_cast<int>(ms));
    };
    limit(s.haveDeadline ? s.deadline : s.idleUntil);
    for (const Pending& p : s.pending) limit(p.since + kHelloPatience);

    std::vector<pollfd> polled{{s.listenFd, POLLIN, 0}};
    for (const Pending& p : s.pending) polled.push_back({p.fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), waitMs) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    readHellos(s, polled);  // also drops connections that stayed silent too long
    if (polled[0].revents != 0) acceptAll(s);
  }
}

void runRoot(std::unique_ptr<RootState> state) {
  RootState& s = *state;
  // A detached thread must not let an exception (bad_alloc, ...) terminate the process that
  // created the id: give up on this communicator instead.
  try {
    serve(s);
  } catch (const std::exception& e) {
    TSR_WARN("bootstrap root at %s stopped: %s", s.address.c_str(), e.what());
  } catch (...) {
    TSR_WARN("bootstrap root at %s stopped on an unknown exception", s.address.c_str());
  }
  for (Pending& p : s.pending) closeFd(&p.fd);
  for (int& fd : s.rankFd) closeFd(&fd);
  closeFd(&s.listenFd);
}

}  // namespace

Result startTcpRoot(const SocketAddress& address, uint64_t nonce, uint32_t version,
                    double idleSeconds, SocketAddress* bound) {
  auto state = std::make_unique<RootState>();
  state->idleUntil = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(idleSeconds));
  TSR_CHECK(listenOn(address, &state->listenFd, bound));
  state->nonce = nonce;
  state->version = version;
  state->address = bound->str();
  int listenFd = state->listenFd;
  try {
    std::thread(runRoot, std::move(state)).detach();
  } catch (const std::system_error& e) {
    ::close(listenFd);
    return TSR_FAIL(tsrSystemError, "cannot start the bootstrap root thread: %s", e.what());
  }
  TSR_INFO("bootstrap root listening on %s", bound->str().c_str());
  return tsrSuccess;
}

}  // namespace tessera
