// Cross-memory attach (DESIGN.md, "Transport"): one copy between this process's memory and any
// address of another process of the host, made by the kernel (process_vm_readv /
// process_vm_writev), for buffers nobody registered, as Open MPI's and MPICH's shared-memory
// transports do. The kernel allows it when the caller may ptrace the target: same user and Yama's
// kernel.yama.ptrace_scope 0 (1 needs a ptracer relationship, 2 needs CAP_SYS_PTRACE, 3 forbids
// it), and no seccomp filter (containers' defaults) refusing the system calls. Whether it works
// is found by trying: each process publishes a probe word with a random value, and the peer reads
// it at connect (CrossMemoryPeer::probe).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace tessera {

// What this process publishes for peers to probe: its pid and where its probe word lives.
struct CrossMemoryEndpoint {
  int32_t pid = 0;
  uint32_t pad = 0;
  uint64_t probeAddress = 0;
  uint64_t probeValue = 0;
};
CrossMemoryEndpoint crossMemoryEndpoint();

class CrossMemoryPeer {
 public:
  // Tries to read the peer's probe word (unless TESSERA_CMA=0). Never fails: a refusal only makes
  // the peer unusable, with the reason kept for usable().
  void probe(const CrossMemoryEndpoint& peer);
  bool usable(std::string* whyNot) const;
  pid_t pid() const { return pid_; }
  bool sameProcess() const;

  // peer[peerAddress, +bytes) -> local dst; local src -> peer[peerAddress, +bytes). Complete on
  // return. tsrRemoteError when the peer is gone, tsrSystemError with the kernel's reason else.
  Result read(void* dst, uint64_t peerAddress, size_t bytes) const;
  Result write(uint64_t peerAddress, const void* src, size_t bytes) const;

 private:
  pid_t pid_ = 0;
  bool usable_ = false;
  std::string whyNot_ = "cross-memory attach was not probed";
};

}  // namespace tessera
