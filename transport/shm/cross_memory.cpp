#include "transport/shm/cross_memory.hpp"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "core/env.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

// The kernel copies at most this much per call before it looks at signals; bigger copies loop.
constexpr size_t kMaxPerCall = size_t{1} << 30;

uint64_t* probeWord() {
  static uint64_t word = [] {
    std::random_device rd;
    uint64_t v = (static_cast<uint64_t>(rd()) << 32) | rd();
    return v == 0 ? 1 : v;
  }();
  return &word;
}

std::string ptraceScope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int v = -1;
  if (f >> v) return strprintf("kernel.yama.ptrace_scope is %d", v);
  return "this kernel has no Yama ptrace_scope";
}

std::string refusal(const char* call, int e, pid_t pid) {
  std::string why = strprintf("%s of pid %d: %s", call, static_cast<int>(pid), std::strerror(e));
  if (e == EPERM)
    why += strprintf(
        " (the kernel allows it to a process that may ptrace the peer: the same "
        "user and kernel.yama.ptrace_scope 0, no seccomp filter denying it; %s)",
        ptraceScope().c_str());
  else if (e == ENOSYS)
    why += " (this kernel has no cross-memory attach)";
  return why;
}

template <bool kWrite>
Result copy(pid_t pid, void* local, uint64_t remote, size_t bytes) {
  char* l = static_cast<char*>(local);
  while (bytes > 0) {
    size_t n = bytes < kMaxPerCall ? bytes : kMaxPerCall;
    iovec li{l, n};
    iovec ri{reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), n};
    ssize_t got = kWrite ? process_vm_writev(pid, &li, 1, &ri, 1, 0)
                         : process_vm_readv(pid, &li, 1, &ri, 1, 0);
    if (got <= 0) {
      int e = got == 0 ? EFAULT : errno;
      if (e == EINTR) continue;
      Result code = e == ESRCH ? tsrRemoteError : tsrSystemError;
      return TSR_FAIL(code, "cross-memory attach: %s at 0x%llx (%zu bytes)",
                      refusal(kWrite ? "process_vm_writev" : "process_vm_readv", e, pid).c_str(),
                      static_cast<unsigned long long>(remote), n);
    }
    l += got;
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return tsrSuccess;
}

}  // namespace

CrossMemoryEndpoint crossMemoryEndpoint() {
  CrossMemoryEndpoint e;
  e.pid = static_cast<int32_t>(getpid());
  e.probeAddress = reinterpret_cast<uintptr_t>(probeWord());
  e.probeValue = *probeWord();
  return e;
}

void CrossMemoryPeer::probe(const CrossMemoryEndpoint& peer) {
  pid_ = static_cast<pid_t>(peer.pid);
  bool enabled = true;
  if (envBool("TESSERA_CMA", &enabled) == tsrSuccess && !enabled) {
    usable_ = false;
    whyNot_ = "TESSERA_CMA=0";
    return;
  }
  uint64_t got = 0;
  iovec li{&got, sizeof got};
  iovec ri{reinterpret_cast<void*>(static_cast<uintptr_t>(peer.probeAddress)), sizeof got};
  ssize_t n = process_vm_readv(pid_, &li, 1, &ri, 1, 0);
  if (n != static_cast<ssize_t>(sizeof got)) {
    usable_ = false;
    whyNot_ = "refused when the connection was made: " +
              refusal("process_vm_readv", n < 0 ? errno : EFAULT, pid_);
    return;
  }
  if (got != peer.probeValue) {
    usable_ = false;
    whyNot_ = strprintf(
        "pid %d's probe word holds another value: a pid of another process (a "
        "pid namespace?)",
        static_cast<int>(pid_));
    return;
  }
  usable_ = true;
  whyNot_.clear();
}

bool CrossMemoryPeer::usable(std::string* whyNot) const {
  if (!usable_ && whyNot != nullptr) *whyNot = whyNot_;
  return usable_;
}

bool CrossMemoryPeer::sameProcess() const { return pid_ == getpid(); }

Result CrossMemoryPeer::read(void* dst, uint64_t peerAddress, size_t bytes) const {
  return copy<false>(pid_, dst, peerAddress, bytes);
}

Result CrossMemoryPeer::write(uint64_t peerAddress, const void* src, size_t bytes) const {
  return copy<true>(pid_, const_cast<void*>(src), peerAddress, bytes);
}

}  // namespace tessera
