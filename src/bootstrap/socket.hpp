// Sockets for the TCP bootstrap: addresses and their wire form, interface selection
// (TESSERA_SOCKET_IFNAME / TESSERA_SOCKET_FAMILY, NCCL's syntax), and I/O that never waits past
// a deadline. The I/O helpers neither log nor record errors (the root thread uses them while
// the process may be exiting); callers turn their status into sentences.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/deadline.hpp"
#include "core/status.hpp"

namespace tessera {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  int port() const;
  void setPort(int port);
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  // "192.0.2.2:4567" or "[fd00::2]:4567".
  std::string str() const;
};

// Wire form: family code (1 = IPv4, 2 = IPv6), port, IPv6 scope id, 16 address bytes.
constexpr size_t kWireAddressBytes = 24;
void encodeAddress(const SocketAddress& address, uint8_t out[kWireAddressBytes]);
bool decodeAddress(const uint8_t in[kWireAddressBytes], SocketAddress* address);

// TESSERA_SOCKET_IFNAME: "eth,ib" (prefixes), "=eth0" (exact names), "^docker" (all but).
struct IfnameFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};
IfnameFilter parseIfnameFilter(const std::string& spec);
bool ifnameMatches(const IfnameFilter& filter, const std::string& ifname);

// The address the bootstrap root listens on: the first interface that is up and matches
// TESSERA_SOCKET_IFNAME (default: the first non-loopback one, else loopback), with an address of
// TESSERA_SOCKET_FAMILY (AUTO prefers IPv4; IPv6 link-local addresses are skipped). Port 0.
Result pickBootstrapAddress(SocketAddress* address, std::string* ifname);

// "host:port" or "[ipv6]:port" (TESSERA_COMM_ID's syntax): the host is a name or a numeric
// address (a name resolving to IPv4 and IPv6 addresses gives the IPv4 one). false with `why`
// when the syntax is wrong or the name does not resolve. A name may wait for DNS.
bool resolveHostPort(const std::string& text, SocketAddress* address, std::string* why);

// A non-blocking listening socket on `address` (port 0: any; SO_REUSEADDR, so that a port whose
// last connections are in TIME_WAIT can be listened on again); `bound` gets the real port.
Result listenOn(const SocketAddress& address, int* fd, SocketAddress* bound);

// How a socket call ended. kWoken: `wakeFd` became readable (an abort).
enum class Io { kOk, kTimeout, kEof, kError, kWoken };

// Connects; *fd is the socket (non-blocking, TCP_NODELAY, close-on-exec). kOk: connected,
// kError: failed with *err (ECONNREFUSED when nothing listens), kTimeout, kWoken.
Io connectWithin(const SocketAddress& address, const Deadline& deadline, int wakeFd, int* fd,
                 int* err);
// Writes/reads all `bytes` of a non-blocking socket, waiting with poll() until the deadline;
// EINTR and partial transfers are handled. A wakeFd of -1 is ignored.
Io writeFull(int fd, const void* data, size_t bytes, const Deadline& deadline, int wakeFd,
             int* err);
Io readFull(int fd, void* data, size_t bytes, const Deadline& deadline, int wakeFd, int* err);
// Reads what is available now (never blocks). kOk with *got == 0 means "nothing yet".
Io readSome(int fd, void* data, size_t bytes, size_t* got, int* err);
// Writes what fits now (never blocks).
Io writeSome(int fd, const void* data, size_t bytes, size_t* put, int* err);

Io waitFd(int fd, short events, const Deadline& deadline, int wakeFd, int* err);
void closeFd(int* fd);
// The local address of a connected socket.
bool localAddress(int fd, SocketAddress* address);

}  // namespace tessera
