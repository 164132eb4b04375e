// CUDA memory for the transport layer: shareable device allocations and pinned host memory.
// Built with CUDA, these call the runtime and the driver (through entry points; libcuda is never
// linked); without CUDA every call fails with tsrInvalidUsage saying CUDA was not built in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.hpp"

namespace tessera {

struct CudaAllocation {
  void* ptr = nullptr;
  size_t bytes = 0;  // rounded up to the allocation granularity
  int device = -1;
  bool vmm = false;      // cuMemCreate with a POSIX-FD handle (else cudaMalloc)
  int shareableFd = -1;  // vmm: the exported POSIX file descriptor (owned by the allocation)
  std::function<void()> release;  // frees everything above
};

// Device memory on `device` that other processes can map: cuMem VMM with a POSIX-FD handle
// where the driver supports it, else cudaMalloc (legacy IPC handles).
Result cudaAllocateShareable(size_t bytes, int device, CudaAllocation* out);

// Pins [ptr, ptr + bytes) and maps it for the GPU (cudaHostRegister, portable and mapped);
// *unpin undoes it.
Result cudaPinHostMemory(void* ptr, size_t bytes, std::function<void()>* unpin);

// The device a pointer lives on, or -1 with a reason when it is not CUDA device memory.
Result cudaPointerDevice(const void* ptr, int* device, std::string* why);

// Host access to a 64-bit word of device memory (the counters of GPU semaphores, when a host
// thread waits or signals): read, write, and a system-scope atomic add that is ordered after
// every earlier write of this process to the device (it runs as a one-thread kernel after a
// device synchronize).
Result cudaReadWord(const uint64_t* devicePtr, uint64_t* value);
Result cudaWriteWord(uint64_t* devicePtr, uint64_t value);
Result cudaAddWord(uint64_t* devicePtr, uint64_t value);

}  // namespace tessera
