// Names shared by the transport layer: the kinds of transport and of memory.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

enum class TransportKind : uint8_t { kInproc = 0, kShm = 1, kUcx = 2, kCudaIpc = 3, kP2p = 4 };
inline constexpr int kTransportKinds = 5;

// "inproc", "shm", "ucx", "cuda_ipc", "p2p".
const char* transportName(TransportKind kind);
// Accepts the names above (case-insensitive); false for anything else.
bool parseTransportKind(const std::string& name, TransportKind* out);

enum class MemoryKind : uint8_t {
  kHost = 0,            // pageable host memory
  kCuda = 1,            // CUDA device memory
  kCudaPinnedHost = 2,  // host memory pinned and mapped for the GPU
};
const char* memoryKindName(MemoryKind kind);  // "host", "cuda", "cuda pinned host"

}  // namespace tessera
