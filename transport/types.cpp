#include "transport/types.hpp"

#include <strings.h>

namespace tessera {

const char* transportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kInproc: return "inproc";
    case TransportKind::kShm: return "shm";
    case TransportKind::kUcx: return "ucx";
    case TransportKind::kCudaIpc: return "cuda_ipc";
    case TransportKind::kP2p: return "p2p";
  }
  return "unknown";
}

bool parseTransportKind(const std::string& name, TransportKind* out) {
  for (int k = 0; k < kTransportKinds; ++k) {
    auto kind = static_cast<TransportKind>(k);
    if (strcasecmp(name.c_str(), transportName(kind)) == 0) {
      *out = kind;
      return true;
    }
  }
  return false;
}

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kCuda: return "cuda";
    case MemoryKind::kCudaPinnedHost: return "cuda pinned host";
  }
  return "unknown";
}

}  // namespace tessera
