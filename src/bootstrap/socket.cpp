#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/env.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;

void putU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void putU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint16_t getU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t getU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
}  // namespace

int SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::setPort(int port) {
  uint16_t p = htons(static_cast<uint16_t>(port));
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = p;
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = p;
}

std::string SocketAddress::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host,
              sizeof(host));
    return strprintf("%s:%d", host, port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host,
              sizeof(host));
    return strprintf("[%s]:%d", host, port());
  }
  return "(no address)";
}

void encodeAddress(const SocketAddress& a, uint8_t out[kWireAddressBytes]) {
  std::memset(out, 0, kWireAddressBytes);
  putU16(out + 2, static_cast<uint16_t>(a.port()));
  if (a.family() == AF_INET) {
    putU16(out, 1);
    std::memcpy(out + 8, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    putU16(out, 2);
    putU32(out + 4, in6->sin6_scope_id);
    std::memcpy(out + 8, &in6->sin6_addr, 16);
  }
}

bool decodeAddress(const uint8_t in[kWireAddressBytes], SocketAddress* a) {
  *a = SocketAddress();
  uint16_t family = getU16(in);
  if (family == 1) {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&a->storage);
    in4->sin_family = AF_INET;
    std::memcpy(&in4->sin_addr, in + 8, 4);
    a->length = sizeof(sockaddr_in);
  } else if (family == 2) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a->storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_scope_id = getU32(in + 4);
    std::memcpy(&in6->sin6_addr, in + 8, 16);
    a->length = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  a->setPort(getU16(in + 2));
  return a->port() != 0;
}

IfnameFilter parseIfnameFilter(const std::string& spec) {
  IfnameFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') f.exclude = true, ++pos;
  if (pos < spec.size() && spec[pos] == '=') f.exact = true, ++pos;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    if (comma > pos) f.names.push_back(spec.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return f;
}

bool ifnameMatches(const IfnameFilter& f, const std::string& ifname) {
  bool listed = false;
  for (const std::string& n : f.names)
    if (f.exact ? ifname == n : ifname.compare(0, n.size(), n) == 0) listed = true;
  return listed != f.exclude;
}

Result pickBootstrapAddress(SocketAddress* address, std::string* ifname) {
  std::string spec, familyName;
  TSR_CHECK(envString("TESSERA_SOCKET_IFNAME", &spec));
  TSR_CHECK(envEnum("TESSERA_SOCKET_FAMILY", &familyName));
  const int want = familyName == "AF_INET" ? AF_INET : familyName == "AF_INET6" ? AF_INET6 : 0;
  const IfnameFilter filter = parseIfnameFilter(spec);

  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return TSR_FAIL(tsrSystemError, "getifaddrs failed: %s", std::strerror(errno));
  struct Candidate {
    std::string name;
    SocketAddress address;
    bool loopback;
  };
  std::vector<Candidate> candidates;
  std::string seen;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (("," + seen + ",").find("," + std::string(i->ifa_name) + ",") == std::string::npos)
      seen += (seen.empty() ? "" : ",") + std::string(i->ifa_name);
    if (want != 0 && fam != want) continue;
    if (fam == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
      continue;
    const bool loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (spec.empty() ? std::strncmp(i->ifa_name, "docker", 6) == 0
                     : !ifnameMatches(filter, i->ifa_name))
      continue;
    Candidate c{i->ifa_name, SocketAddress(), loopback};
    c.address.length = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&c.address.storage, i->ifa_addr, c.address.length);
    c.address.setPort(0);
    candidates.push_back(c);
  }
  freeifaddrs(list);

  // By default a loopback interface is the last resort; AUTO takes IPv4 before IPv6.
  const Candidate* best = nullptr;
  auto rank = [&](const Candidate& c) {
    return (spec.empty() && c.loopback ? 2 : 0) + (c.address.family() == AF_INET6 ? 1 : 0);
  };
  for (const Candidate& c : candidates)
    if (best == nullptr || rank(c) < rank(*best)) best = &c;
  if (best == nullptr)
    return TSR_FAIL(
        tsrInvalidArgument,
        "no network interface for the TCP bootstrap: %s='%s' and %s=%s match no interface that "
        "is up (interfaces that are up with an address: %s)",
        envSourceName("TESSERA_SOCKET_IFNAME"), spec.c_str(),
        envSourceName("TESSERA_SOCKET_FAMILY"), familyName.c_str(), seen.c_str());
  *address = best->address;
  *ifname = best->name;
  return tsrSuccess;
}

bool resolveHostPort(const std::string& text, SocketAddress* address, std::string* why) {
  size_t colon = text.rfind(':');
  std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed)
    host = host.substr(1, host.size() - 2);
  else if (host.find_first_of("[]:") != std::string::npos)
    host.clear();  // an IPv6 address without brackets: its last group would read as the port
  const bool portOk = !port.empty() && port.size() <= 5 &&
                      port.find_first_not_of("0123456789") == std::string::npos &&
                      std::stoi(port) >= 1 && std::stoi(port) <= 65535;
  if (host.empty() || !portOk) {
    *why = "expected host:port or [ipv6]:port with a port in [1, 65535]";
    return false;
  }
  addrinfo hints{};
  hints.ai_family = bracketed ? AF_INET6 : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    *why = strprintf("cannot resolve '%s': %s", host.c_str(), gai_strerror(rc));
    return false;
  }
  const addrinfo* best = nullptr;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    if (best == nullptr || (a->ai_family == AF_INET && best->ai_family != AF_INET)) best = a;
  }
  if (best != nullptr) {
    *address = SocketAddress();
    std::memcpy(&address->storage, best->ai_addr, best->ai_addrlen);
    address->length = best->ai_addrlen;
  }
  freeaddrinfo(list);
  if (best == nullptr) *why = strprintf("'%s' has no IPv4 or IPv6 address", host.c_str());
  return best != nullptr;
}

Result listenOn(const SocketAddress& address, int* fd, SocketAddress* bound) {
  int s = ::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0)
    return TSR_FAIL(tsrSystemError, "socket() for listening on %s failed: %s",
                    address.str().c_str(), std::strerror(errno));
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s, address.get(), address.length) != 0 || ::listen(s, SOMAXCONN) != 0) {
    int e = errno;
    ::close(s);
    return TSR_FAIL(tsrSystemError, "cannot listen on %s: %s", address.str().c_str(),
                    std::strerror(e));
  }
  *bound = address;
  bound->length = sizeof(bound->storage);
  if (getsockname(s, reinterpret_cast<sockaddr*>(&bound->storage), &bound->length) != 0) {
    int e = errno;
    ::close(s);
    return TSR_FAIL(tsrSystemError, "getsockname on a listening socket failed: %s",
                    std::strerror(e));
  }
  *fd = s;
  return tsrSuccess;
}

Io waitFd(int fd, short events, const Deadline& deadline, int wakeFd, int* err) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {wakeFd, POLLIN, 0}};
    int n = ::poll(p, wakeFd >= 0 ? 2 : 1, deadline.remainingMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return Io::kError;
    }
    if (wakeFd >= 0 && (p[1].revents & POLLIN)) return Io::kWoken;
    if (p[0].revents != 0) return Io::kOk;  // errors and hang-ups show up in the next call
    if (deadline.expired()) return Io::kTimeout;
  }
}

Io connectWithin(const SocketAddress& address, const Deadline& deadline, int wakeFd, int* fd,
                 int* err) {
  *fd = ::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (*fd < 0) {
    *err = errno;
    return Io::kError;
  }
  int one = 1;
  setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int rc;
  do {
    rc = ::connect(*fd, address.get(), address.length);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    *err = errno;
    closeFd(fd);
    return Io::kError;
  }
  if (rc != 0) {
    Io io = waitFd(*fd, POLLOUT, deadline, wakeFd, err);
    if (io != Io::kOk) {
      closeFd(fd);
      return io;
    }
    socklen_t len = sizeof(*err);
    if (getsockopt(*fd, SOL_SOCKET, SO_ERROR, err, &len) != 0) *err = errno;
    if (*err != 0) {
      closeFd(fd);
      return Io::kError;
    }
  }
  return Io::kOk;
}

Io readSome(int fd, void* data, size_t bytes, size_t* got, int* err) {
  *got = 0;
  for (;;) {
    ssize_t n = ::recv(fd, data, bytes, MSG_DONTWAIT);
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return Io::kOk;
    }
    if (n == 0) return bytes == 0 ? Io::kOk : Io::kEof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kOk;
    *err = errno;
    return errno == ECONNRESET ? Io::kEof : Io::kError;
  }
}

Io writeSome(int fd, const void* data, size_t bytes, size_t* put, int* err) {
  *put = 0;
  for (;;) {
    ssize_t n = ::send(fd, data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      *put = static_cast<size_t>(n);
      return Io::kOk;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kOk;
    *err = errno;
    return (errno == EPIPE || errno == ECONNRESET) ? Io::kEof : Io::kError;
  }
}

Io writeFull(int fd, const void* data, size_t bytes, const Deadline& deadline, int wakeFd,
             int* err) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    size_t put = 0;
    Io io = writeSome(fd, p, bytes, &put, err);
    if (io != Io::kOk) return io;
    p += put;
    bytes -= put;
    if (bytes > 0 && put == 0) {
      io = waitFd(fd, POLLOUT, deadline, wakeFd, err);
      if (io != Io::kOk) return io;
    }
  }
  return Io::kOk;
}

Io readFull(int fd, void* data, size_t bytes, const Deadline& deadline, int wakeFd, int* err) {
  uint8_t* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    size_t got = 0;
    Io io = readSome(fd, p, bytes, &got, err);
    if (io != Io::kOk) return io;
    p += got;
    bytes -= got;
    if (bytes > 0 && got == 0) {
      io = waitFd(fd, POLLIN, deadline, wakeFd, err);
      if (io != Io::kOk) return io;
    }
  }
  return Io::kOk;
}

void closeFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

bool localAddress(int fd, SocketAddress* address) {
  *address = SocketAddress();
  address->length = sizeof(address->storage);
  return getsockname(fd, reinterpret_cast<sockaddr*>(&address->storage), &address->length) == 0;
}

}  // namespace tessera
