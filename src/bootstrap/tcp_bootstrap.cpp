// The TCP bootstrap after joining: point-to-point messages over persistent connections, and the
// collectives built on them. Everything runs on the calling thread: whoever waits (for a
// message, or for a socket to take more bytes) also accepts connections and reads incoming
// frames into the mailbox, so no rank ever waits for another rank to call recv.
#include "bootstrap/tcp_bootstrap.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bootstrap/unique_id.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;
constexpr uint64_t kPayloadChunk = 64 * 1024;
// A peer sends its hello as soon as it connects; a connection silent this long is not a rank.
constexpr auto kHelloPatience = std::chrono::seconds(30);
}  // namespace

TcpBootstrap::TcpBootstrap(int rank, int nranks, double timeout, uint64_t nonce, int listenFd,
                           int wakeFd, std::vector<SocketAddress> peers)
    : Bootstrap(rank, nranks, timeout),
      nonce_(nonce),
      listenFd_(listenFd),
      wakeFd_(wakeFd),
      peers_(std::move(peers)),
      outbound_(static_cast<size_t>(nranks), -1),
      inbound_(static_cast<size_t>(nranks)) {}

TcpBootstrap::~TcpBootstrap() {
  for (int& fd : outbound_) closeFd(&fd);
  for (Inbound& in : inbound_) closeFd(&in.fd);
  for (Accepted& a : accepted_) closeFd(&a.fd);
  closeFd(&listenFd_);
  closeFd(&wakeFd_);
}

void TcpBootstrap::doAbort() {
  uint64_t one = 1;
  // The eventfd stays readable, so every later poll() of this instance wakes at once.
  ssize_t ignored = ::write(wakeFd_, &one, sizeof(one));
  (void)ignored;
  // Peers learn at once: their reads from us end, their connections to us are refused.
  // shutdown() leaves the descriptors to the operation thread, which closes them.
  std::lock_guard<std::mutex> lock(fdMutex_);
  for (int fd : outbound_)
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  for (const Inbound& in : inbound_)
    if (in.fd >= 0) ::shutdown(in.fd, SHUT_RDWR);
  for (const Accepted& a : accepted_)
    if (a.fd >= 0) ::shutdown(a.fd, SHUT_RDWR);
  ::shutdown(listenFd_, SHUT_RDWR);
}

void TcpBootstrap::dropFd(int* fd) {
  std::lock_guard<std::mutex> lock(fdMutex_);
  closeFd(fd);
}

// ---- receiving ---------------------------------------------------------------------------

void TcpBootstrap::acceptConnections() {
  for (;;) {
    int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;
    }
    std::lock_guard<std::mutex> lock(fdMutex_);
    accepted_.push_back(Accepted{fd, PeerHello{}, 0, Clock::now()});
  }
}

void TcpBootstrap::readHello(Accepted& a) {
  size_t got = 0;
  int err = 0;
  Io io = readSome(a.fd, reinterpret_cast<uint8_t*>(&a.hello) + a.got, sizeof(PeerHello) - a.got,
                   &got, &err);
  a.got += got;
  if (io != Io::kOk) return dropFd(&a.fd);
  if (a.got < sizeof(PeerHello)) return;
  const PeerHello& h = a.hello;
  const char* bad = nullptr;
  if (h.magic != kPeerHelloMagic || h.nonce != nonce_)
    bad = "it is not a rank of this communicator";
  else if (h.destination != rank())
    bad = "it was meant for another rank";
  else if (h.source < 0 || h.source >= nranks() || h.source == rank())
    bad = "its source rank is out of range";
  else if (inbound_[static_cast<size_t>(h.source)].fd >= 0 ||
           inbound_[static_cast<size_t>(h.source)].ended)
    bad = "that rank is already connected";
  if (bad != nullptr) {
    TSR_WARN("tcp bootstrap, rank %d: dropped a connection claiming to come from rank %d: %s",
             rank(), h.source, bad);
    return dropFd(&a.fd);
  }
  {
    std::lock_guard<std::mutex> lock(fdMutex_);
    inbound_[static_cast<size_t>(h.source)].fd = a.fd;
    a.fd = -1;
  }
  readFrames(h.source);  // frames may have arrived right behind the hello
}

void TcpBootstrap::endInbound(int peer, const std::string& why) {
  Inbound& in = inbound_[static_cast<size_t>(peer)];
  dropFd(&in.fd);
  in.ended = true;
  in.endedWhy = why;
}

void TcpBootstrap::readFrames(int peer) {
  Inbound& in = inbound_[static_cast<size_t>(peer)];
  for (;;) {
    size_t got = 0;
    int err = 0;
    Io io;
    if (in.headerGot < sizeof(FrameHeader)) {
      io = readSome(in.fd, reinterpret_cast<uint8_t*>(&in.header) + in.headerGot,
                    sizeof(FrameHeader) - in.headerGot, &got, &err);
      in.headerGot += got;
      if (io == Io::kOk && in.headerGot == sizeof(FrameHeader)) {
        const FrameHeader& h = in.header;
        if (h.magic != kFrameMagic || h.source != peer || h.bytes > kMaxMessageBytes)
          return endInbound(peer, "it sent a corrupted message header");
        // The buffer grows with the bytes that actually arrive, so a header that announces
        // more than the peer sends costs nothing.
        in.payload.assign(static_cast<size_t>(std::min<uint64_t>(h.bytes, kPayloadChunk)), 0);
        in.payloadGot = 0;
      }
    } else {
      if (in.payloadGot == in.payload.size())
        in.payload.resize(static_cast<size_t>(
            std::min<uint64_t>(in.header.bytes, 2 * static_cast<uint64_t>(in.payload.size()))));
      io = readSome(in.fd, in.payload.data() + in.payloadGot, in.payload.size() - in.payloadGot,
                    &got, &err);
      in.payloadGot += got;
    }
    if (io == Io::kEof) {
      bool midMessage = in.headerGot > 0;
      return endInbound(peer, midMessage ? "its connection ended in the middle of a message "
                                           "(it exited or crashed)"
                                         : "it closed its connection (it exited, aborted or "
                                           "destroyed its bootstrap)");
    }
    if (io != Io::kOk)
      return endInbound(peer, strprintf("reading from it failed: %s", std::strerror(err)));
    if (in.headerGot == sizeof(FrameHeader) && in.payloadGot == in.header.bytes) {
      mailbox_[{peer, in.header.tag}].push_back(std::move(in.payload));
      in.payload = std::vector<uint8_t>();
      in.headerGot = 0;
      in.payloadGot = 0;
      continue;  // a zero-size frame consumed no bytes: look for the next one
    }
    if (got == 0) return;  // drained for now
  }
}

Result TcpBootstrap::progress(const Deadline& deadline, int writeFd, const std::string& what) {
  // Slots: wake, listen, accepted connections, inbound connections, the socket we write to.
  std::vector<pollfd> fds{{wakeFd_, POLLIN, 0}, {listenFd_, POLLIN, 0}};
  for (const Accepted& a : accepted_) fds.push_back({a.fd, POLLIN, 0});
  std::vector<int> inboundPeer;
  for (int p = 0; p < nranks(); ++p)
    if (inbound_[static_cast<size_t>(p)].fd >= 0) {
      fds.push_back({inbound_[static_cast<size_t>(p)].fd, POLLIN, 0});
      inboundPeer.push_back(p);
    }
  if (writeFd >= 0) fds.push_back({writeFd, POLLOUT, 0});
  int n = ::poll(fds.data(), fds.size(), deadline.remainingMs());
  if (n < 0 && errno != EINTR)
    return fail(tsrSystemError, "%s: poll failed: %s", what.c_str(), std::strerror(errno));
  if (aborted() || (fds[0].revents & POLLIN)) return interrupted(what.c_str());
  if (n <= 0) return tsrSuccess;

  size_t slot = 2;
  const auto now = Clock::now();
  for (Accepted& a : accepted_) {
    if (fds[slot++].revents != 0) readHello(a);
    if (a.fd >= 0 && now - a.since > kHelloPatience) dropFd(&a.fd);
  }
  {
    std::lock_guard<std::mutex> lock(fdMutex_);
    std::erase_if(accepted_, [](const Accepted& a) { return a.fd < 0; });
  }
  for (int p : inboundPeer)
    if (fds[slot++].revents != 0 && inbound_[static_cast<size_t>(p)].fd >= 0) readFrames(p);
  if (fds[1].revents != 0) acceptConnections();
  return tsrSuccess;
}

Result TcpBootstrap::receiveMessage(int peer, int tag, void* data, size_t bytes,
                                    const Deadline& deadline, const std::string& what) {
  for (;;) {
    auto box = mailbox_.find({peer, tag});
    if (box != mailbox_.end() && !box->second.empty()) {
      std::vector<uint8_t> msg = std::move(box->second.front());
      box->second.pop_front();
      if (msg.size() != bytes)
        return fail(tsrInvalidUsage,
                    "%s: expected %zu bytes from rank %d but its message has "
                    "%zu bytes",
                    what.c_str(), bytes, peer, msg.size());
      if (bytes > 0) std::memcpy(data, msg.data(), bytes);
      return tsrSuccess;
    }
    const Inbound& in = inbound_[static_cast<size_t>(peer)];
    if (in.ended)
      return fail(tsrRemoteError, "%s: rank %d will send nothing more: %s", what.c_str(), peer,
                  in.endedWhy.c_str());
    if (deadline.expired())
      return fail(tsrTimeout, "%s: timed out after %s waiting for a message from rank %d%s",
                  what.c_str(), secondsText(deadline.seconds()).c_str(), peer,
                  in.fd < 0 && peer != rank() ? " (it never connected to this rank)" : "");
    TSR_CHECK(progress(deadline, -1, what));
  }
}

// ---- sending -----------------------------------------------------------------------------

Result TcpBootstrap::writeToPeer(int peer, const void* data, size_t bytes, const Deadline& deadline,
                                 const std::string& what) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  int& fd = outbound_[static_cast<size_t>(peer)];
  while (bytes > 0) {
    size_t put = 0;
    int err = 0;
    Io io = writeSome(fd, p, bytes, &put, &err);
    if (io != Io::kOk) {
      dropFd(&fd);
      if (aborted()) return interrupted(what.c_str());  // our own abort cut the connection
      return fail(tsrRemoteError,
                  "%s: rank %d closed its connection while this rank was "
                  "writing to it (%s): it exited, crashed or aborted",
                  what.c_str(), peer, io == Io::kEof ? "connection reset" : std::strerror(err));
    }
    p += put;
    bytes -= put;
    if (bytes == 0 || put > 0) continue;
    if (deadline.expired()) {
      // The frame is cut; the peer must not read the rest of the stream as a new frame.
      dropFd(&fd);
      return fail(tsrTimeout, "%s: timed out after %s writing to rank %d (it stopped reading)",
                  what.c_str(), secondsText(deadline.seconds()).c_str(), peer);
    }
    Result r = progress(deadline, fd, what);
    if (r != tsrSuccess) {
      dropFd(&fd);
      return r;
    }
  }
  return tsrSuccess;
}

Result TcpBootstrap::connectPeer(int peer, const Deadline& deadline, const std::string& what) {
  int& fd = outbound_[static_cast<size_t>(peer)];
  if (fd >= 0) return tsrSuccess;
  const SocketAddress& address = peers_[static_cast<size_t>(peer)];
  int err = 0, connected = -1;
  Io io = connectWithin(address, deadline, wakeFd_, &connected, &err);
  if (io == Io::kOk) {
    std::lock_guard<std::mutex> lock(fdMutex_);
    fd = connected;
    // An abort that came while connecting must still cut this connection.
    if (aborted()) ::shutdown(fd, SHUT_RDWR);
  }
  if (io == Io::kWoken || aborted()) return interrupted(what.c_str());
  if (io == Io::kTimeout)
    return fail(tsrTimeout, "%s: connecting to rank %d at %s timed out after %s", what.c_str(),
                peer, address.str().c_str(), secondsText(deadline.seconds()).c_str());
  if (io != Io::kOk)
    return fail(tsrRemoteError, "%s: cannot connect to rank %d at %s: %s (it exited?)",
                what.c_str(), peer, address.str().c_str(), std::strerror(err));
  PeerHello hello{kPeerHelloMagic, rank(), peer, 0, nonce_};
  return writeToPeer(peer, &hello, sizeof(hello), deadline, what);
}

Result TcpBootstrap::sendMessage(int peer, int tag, const void* data, size_t bytes,
                                 const Deadline& deadline, const std::string& what) {
  if (bytes > kMaxMessageBytes)
    return fail(tsrInvalidArgument, "%s: %zu bytes is more than the bootstrap carries (%llu)",
                what.c_str(), bytes, static_cast<unsigned long long>(kMaxMessageBytes));
  if (peer == rank()) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    mailbox_[{peer, tag}].emplace_back(p, p + bytes);
    return tsrSuccess;
  }
  TSR_CHECK(connectPeer(peer, deadline, what));
  FrameHeader header{kFrameMagic, rank(), tag, 0, bytes};
  TSR_CHECK(writeToPeer(peer, &header, sizeof(header), deadline, what));
  return writeToPeer(peer, data, bytes, deadline, what);
}

// ---- the interface ---------------------------------------------------------------------

Result TcpBootstrap::doSend(int peer, int tag, const void* data, size_t bytes,
                            const Deadline& deadline) {
  return sendMessage(peer, tag, data, bytes, deadline,
                     strprintf("send of %zu bytes to rank %d with tag %d", bytes, peer, tag));
}

Result TcpBootstrap::doRecv(int peer, int tag, void* data, size_t bytes, const Deadline& deadline) {
  return receiveMessage(peer, tag, data, bytes, deadline,
                        strprintf("recv from rank %d with tag %d", peer, tag));
}

// A ring: at step s each rank passes on the slot it received at step s-1.
Result TcpBootstrap::doAllGather(void* data, size_t bytesPerRank, const Deadline& deadline) {
  const int n = nranks();
  const int right = (rank() + 1) % n, left = (rank() + n - 1) % n;
  uint8_t* base = static_cast<uint8_t*>(data);
  for (int step = 0; step + 1 < n; ++step) {
    const size_t sendSlot = static_cast<size_t>((rank() - step + n) % n);
    const size_t recvSlot = static_cast<size_t>((rank() - step - 1 + 2 * n) % n);
    std::string what = strprintf("allGather of %zu bytes per rank (ring step %d of %d)",
                                 bytesPerRank, step + 1, n - 1);
    TSR_CHECK(sendMessage(right, kTagAllGather, base + sendSlot * bytesPerRank, bytesPerRank,
                          deadline, what));
    TSR_CHECK(receiveMessage(left, kTagAllGather, base + recvSlot * bytesPerRank, bytesPerRank,
                             deadline, what));
  }
  return tsrSuccess;
}

// Dissemination: after round k a rank has heard, directly or not, from the 2^(k+1) ranks
// before it.
Result TcpBootstrap::doBarrier(const Deadline& deadline) {
  const int n = nranks();
  int round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    std::string what = strprintf("barrier (round %d)", round + 1);
    TSR_CHECK(sendMessage((rank() + k) % n, kTagBarrier, nullptr, 0, deadline, what));
    TSR_CHECK(receiveMessage((rank() - k + n) % n, kTagBarrier, nullptr, 0, deadline, what));
  }
  return tsrSuccess;
}

Result TcpBootstrap::doBroadcast(void* data, size_t bytes, int root, const Deadline& deadline) {
  std::string what = strprintf("broadcast of %zu bytes from root %d", bytes, root);
  if (rank() != root) return receiveMessage(root, kTagBroadcast, data, bytes, deadline, what);
  for (int p = 0; p < nranks(); ++p)
    if (p != root) TSR_CHECK(sendMessage(p, kTagBroadcast, data, bytes, deadline, what));
  return tsrSuccess;
}

Result TcpBootstrap::splitPrepare(int childSize, uint8_t payload[kSplitPayloadBytes]) {
  static_assert(sizeof(tsrUniqueId) <= kSplitPayloadBytes);
  tsrUniqueId id;
  TSR_CHECK(createUniqueId(&id));
  std::memcpy(payload, &id, sizeof(id));
  return tsrSuccess;
}

Result TcpBootstrap::splitJoin(const uint8_t payload[kSplitPayloadBytes], int childRank,
                               int childSize, std::unique_ptr<Bootstrap>* child) {
  tsrUniqueId id;
  std::memcpy(&id, payload, sizeof(id));
  return create(id, childRank, childSize, childOptions(), child);
}

}  // namespace tessera
