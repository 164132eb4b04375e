// The TCP bootstrap's peer stream: what a rank reads from a connection another process opened to
// its listening socket (tcp_wire.hpp: a PeerHello, then frames of FrameHeader + payload). Anyone
// who can reach the port can send anything, so garbage must end that connection and nothing else:
// no crash, no allocation beyond what actually arrived, no message that was not whole.
//
// Input: byte 0 = (chunk << 2) | (nranks - 2), byte 1 = this rank (mod nranks), then the bytes of
// the stream. They reach the rank through a socketpair in pieces of `chunk` bytes (0: at once),
// with a round of the bootstrap's own progress() after each piece, so headers and payloads also
// arrive split; then the writer closes. Every message that reached the mailbox is then received.
// The nonce of the communicator is kNonce (seeds carry it, so their hellos are accepted).
//
// The reading code is private to TcpBootstrap and interleaved with its sockets; TcpBootstrap
// makes TcpBootstrapWireFuzz (below) a friend, so this file drives it without a root and a
// listening socket.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/tcp_wire.hpp"
#include "fuzz_common.hpp"
#include "tessera/tessera.h"

namespace tessera {

// TcpBootstrap's friend: the private parts this fuzzer needs, and nothing else.
struct TcpBootstrapWireFuzz {
  // A rank with no listening socket (-1: poll() skips it) and `fd` as a just-accepted connection.
  static std::unique_ptr<TcpBootstrap> make(int rank, int nranks, uint64_t nonce, int wake,
                                            int fd) {
    std::unique_ptr<TcpBootstrap> b(
        new TcpBootstrap(rank, nranks, 5.0, nonce, -1, wake, std::vector<SocketAddress>(nranks)));
    b->accepted_.push_back(TcpBootstrap::Accepted{fd, PeerHello{}, 0, Clock::now()});
    return b;
  }
  static Result progress(TcpBootstrap& b) { return b.progress(Deadline::after(0), -1, "fuzz"); }
  static bool anyOpen(const TcpBootstrap& b) {
    for (const auto& a : b.accepted_)
      if (a.fd >= 0) return true;
    for (const auto& in : b.inbound_)
      if (in.fd >= 0) return true;
    return false;
  }
  // ((peer, tag), bytes) of every message in the mailbox.
  static std::vector<std::pair<std::pair<int, int>, size_t>> messages(const TcpBootstrap& b) {
    std::vector<std::pair<std::pair<int, int>, size_t>> out;
    for (const auto& [key, queue] : b.mailbox_)
      for (const auto& m : queue) out.push_back({key, m.size()});
    return out;
  }
  static Result receive(TcpBootstrap& b, int peer, int tag, void* data, size_t bytes) {
    return b.receiveMessage(peer, tag, data, bytes, Deadline::after(0), "fuzz");
  }
};

}  // namespace tessera

namespace tessera::fuzz {
namespace {

constexpr uint64_t kNonce = 0x6e6f6e63655a5a31ull;  // "1ZZecnon" little-endian
using Wire = TcpBootstrapWireFuzz;

void run(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const int nranks = 2 + (data[0] & 3);
  const size_t chunk = data[0] >> 2;
  const int rank = data[1] % nranks;
  const uint8_t* stream = data + 2;
  size_t left = size - 2;

  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int sv[2];
  if (wake < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
    broken("eventfd / socketpair failed");
  // No listening socket; the stream arrives as if just accepted.
  std::unique_ptr<TcpBootstrap> b = Wire::make(rank, nranks, kNonce, wake, sv[0]);

  while (left > 0) {
    size_t n = chunk == 0 ? left : std::min(chunk, left);
    // MSG_NOSIGNAL: the rank may have dropped the connection already.
    ssize_t put = ::send(sv[1], stream, n, MSG_NOSIGNAL);
    if (put <= 0) break;  // dropped, or the socket buffer is full: the rest is never sent
    stream += put;
    left -= static_cast<size_t>(put);
    if (Wire::progress(*b) != tsrSuccess) broken("progress failed");
  }
  ::close(sv[1]);
  for (int round = 0; round < 8 && Wire::anyOpen(*b); ++round)
    if (Wire::progress(*b) != tsrSuccess) broken("progress failed");
  if (Wire::anyOpen(*b)) broken("the connection is still open after its end was read");

  const auto messages = Wire::messages(*b);
  std::vector<uint8_t> buffer;
  for (const auto& [key, bytes] : messages) {
    if (key.first == rank || key.first < 0 || key.first >= nranks)
      broken("a message from a rank that cannot send here");
    buffer.assign(bytes + 1, 0);
    if (Wire::receive(*b, key.first, key.second, buffer.data(), bytes) != tsrSuccess)
      broken("a message in the mailbox cannot be received");
  }
}

}  // namespace
}  // namespace tessera::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::run(data, size);
  return 0;
}
