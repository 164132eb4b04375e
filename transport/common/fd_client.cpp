// The client side of the fd server (fd_server.hpp): fetching a descriptor and watching a peer's
// server. Every wait has a deadline.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "transport/common/fd_server.hpp"
#include "transport/common/fd_wire.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;
using namespace fdwire;

// Waits until `sock` is ready for `events` or the deadline passes.
Result waitReady(int sock, short events, const Deadline& deadline, const std::string& address,
                 const char* what) {
  for (;;) {
    pollfd p{sock, events, 0};
    int n = ::poll(&p, 1, deadline.remainingMs());
    if (n > 0) return tsrSuccess;
    if (n < 0 && errno != EINTR)
      return TSR_FAIL(tsrSystemError, "fd server %s: poll while %s failed: %s", address.c_str(),
                      what, std::strerror(errno));
    if (deadline.expired())
      return TSR_FAIL(tsrTimeout, "fd server %s: no progress within %.3g s while %s",
                      address.c_str(), deadline.seconds(), what);
  }
}

// Connects, sends the request and receives the reply (and a descriptor when one comes).
Result request(const std::string& address, uint32_t op, uint64_t key, const Deadline& deadline,
               int* sockOut, Reply* reply, int* fd) {
  *fd = -1;
  sockaddr_un sa;
  socklen_t len;
  if (!makeAddress(address, &sa, &len))
    return TSR_FAIL(tsrInvalidArgument, "fd server address of %zu bytes is not valid",
                    address.size());
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0)
    return TSR_FAIL(tsrSystemError, "socket(AF_UNIX) to reach fd server %s failed: %s",
                    address.c_str(), std::strerror(errno));
  auto failClosed = [&](Result r) {
    ::close(s);
    return r;
  };
  // A full backlog answers EAGAIN: retry until the deadline.
  while (::connect(s, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN)
      return failClosed(TSR_FAIL(tsrRemoteError,
                                 "cannot reach fd server %s (its process has exited?): %s",
                                 address.c_str(), std::strerror(errno)));
    if (deadline.expired())
      return failClosed(TSR_FAIL(tsrTimeout, "fd server %s: its backlog stayed full for %.3g s",
                                 address.c_str(), deadline.seconds()));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Request q{kRequestMagic, op, key};
  size_t sent = 0;
  while (sent < sizeof q) {
    Result w = waitReady(s, POLLOUT, deadline, address, "sending a request");
    if (w != tsrSuccess) return failClosed(w);
    ssize_t n =
        ::send(s, reinterpret_cast<char*>(&q) + sent, sizeof q - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return failClosed(TSR_FAIL(tsrRemoteError, "fd server %s: sending a request failed: %s",
                                 address.c_str(), std::strerror(errno)));
    if (n > 0) sent += static_cast<size_t>(n);
  }
  size_t got = 0;
  while (got < sizeof *reply) {
    Result w = waitReady(s, POLLIN, deadline, address, "waiting for its reply");
    if (w != tsrSuccess) return failClosed(w);
    iovec iov{reinterpret_cast<char*>(reply) + got, sizeof *reply - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(s, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); n > 0 && cm != nullptr; cm = CMSG_NXTHDR(&msg, cm))
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
          cm->cmsg_len == CMSG_LEN(sizeof(int))) {
        if (*fd >= 0) ::close(*fd);  // a server that sends more than one keeps none leaked
        std::memcpy(fd, CMSG_DATA(cm), sizeof(int));
      }
    if (n <= 0) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
      return failClosed(
          TSR_FAIL(tsrRemoteError, "fd server %s closed the connection before replying%s%s",
                   address.c_str(), n < 0 ? ": " : "", n < 0 ? std::strerror(errno) : ""));
    }
    got += static_cast<size_t>(n);
  }
  if (reply->magic != kReplyMagic) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    return failClosed(
        TSR_FAIL(tsrRemoteError, "%s does not answer like a tessera fd server", address.c_str()));
  }
  *sockOut = s;
  return tsrSuccess;
}

}  // namespace

Result fetchFd(const std::string& address, uint64_t key, const Deadline& deadline, int* fd) {
  *fd = -1;
  int sock = -1, got = -1;
  Reply reply{};
  TSR_CHECK(request(address, kOpFetch, key, deadline, &sock, &reply, &got));
  ::close(sock);
  if (reply.status != kGranted || got < 0) {
    if (got >= 0) ::close(got);
    return TSR_FAIL(tsrRemoteError,
                    "fd server %s refused key %016llx (%s): the memory was deregistered or the "
                    "key is wrong",
                    address.c_str(), static_cast<unsigned long long>(key),
                    reply.status == kUnknownKey ? "unknown key" : "no descriptor sent");
  }
  *fd = got;
  return tsrSuccess;
}

Result watchFdServer(const std::string& address, const Deadline& deadline, int* sock) {
  *sock = -1;
  int s = -1, fd = -1;
  Reply reply{};
  TSR_CHECK(request(address, kOpWatch, 0, deadline, &s, &reply, &fd));
  if (fd >= 0) ::close(fd);
  if (reply.status != kGranted) {
    ::close(s);
    return TSR_FAIL(tsrRemoteError, "fd server %s refused a watch (status %u)", address.c_str(),
                    reply.status);
  }
  *sock = s;
  return tsrSuccess;
}

bool peerGone(int sock) {
  if (sock < 0) return true;
  pollfd p{sock, POLLIN | POLLRDHUP, 0};
  int n = ::poll(&p, 1, 0);
  if (n <= 0) return false;  // nothing happened (or EINTR: ask again next time)
  if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) return true;
  // The server never writes on a watch after its acknowledgement; readable means EOF.
  char b;
  ssize_t r = ::recv(sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
}

}  // namespace tessera
