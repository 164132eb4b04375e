// The fd server's wire protocol (fd_server.hpp), shared by the server and its clients. Host byte
// order: both ends are processes of one host running one build.
//   client -> server  Request {magic, op, key}
//   server -> client  Reply {magic, status}; for a granted fetch, the descriptor rides along as
//                     SCM_RIGHTS. A fetch connection is then closed by the server; a watch stays
//                     open, silent, until either process closes it or exits.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tessera::fdwire {

constexpr uint32_t kRequestMagic = 0x54534651;  // "TSFQ"
constexpr uint32_t kReplyMagic = 0x54534652;    // "TSFR"
enum Op : uint32_t { kOpFetch = 1, kOpWatch = 2 };
enum Status : uint32_t { kGranted = 0, kUnknownKey = 1, kBadRequest = 2 };

struct Request {
  uint32_t magic;
  uint32_t op;
  uint64_t key;
};
struct Reply {
  uint32_t magic;
  uint32_t status;
};

// The abstract-namespace address: sun_path[0] is NUL, the name follows without a terminator.
inline bool makeAddress(const std::string& name, sockaddr_un* sa, socklen_t* len) {
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof sa->sun_path) return false;
  std::memcpy(sa->sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return true;
}

}  // namespace tessera::fdwire
