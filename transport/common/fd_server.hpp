// Passing file descriptors between processes of one host (memfd segments of shm, POSIX-FD
// handles of cuMem allocations for cuda_ipc): each process runs one small server on an abstract
// Unix socket (no file in the file system, nothing left behind when the process dies), and a peer
// fetches a descriptor with SCM_RIGHTS by presenting the 64-bit random key it was offered under.
// The key is the capability: a process can only get descriptors it was told the key of.
//
// A peer also keeps a connection to the server open as a watch: when the serving process dies,
// the kernel closes its end and the watch reports it at once (pids are not trusted: they repeat
// across pid namespaces).
#pragma once

#include <cstdint>
#include <string>

#include "core/deadline.hpp"
#include "core/status.hpp"

namespace tessera {

class FdServer {
 public:
  // The process-wide server, started on first use (and again in a forked child).
  static Result instance(FdServer** out);

  // The abstract socket name peers connect to.
  virtual const std::string& address() const = 0;
  // Offers a duplicate of `fd` under a fresh random key until withdraw(key).
  virtual Result offer(int fd, uint64_t* key) = 0;
  virtual void withdraw(uint64_t key) = 0;

 protected:
  virtual ~FdServer() = default;
};

// Connects to the server at `address`, presents `key` and receives the descriptor (the caller
// owns it). tsrRemoteError when the server is gone or refuses the key, tsrTimeout at the deadline.
Result fetchFd(const std::string& address, uint64_t key, const Deadline& deadline, int* fd);

// Opens a watch on the server at `address` (the caller owns the socket). peerGone(sock) tells
// whether the serving process has exited.
Result watchFdServer(const std::string& address, const Deadline& deadline, int* sock);
bool peerGone(int sock);

}  // namespace tessera
