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

// Device memory for users who register it (tsrMemAllocDevice, ncclMemAlloc): cudaMalloc on
// `device` (-1: the calling thread's current device), zeroed, so that a registration inside it is
// exported by its legacy IPC handle (cuda_ipc) or used as is (p2p). Released when the device is
// idle (a resident grid holds cudaFree back). Fails with tsrInvalidUsage where no device is
// visible or `device` is not one.
Result cudaAllocateForUser(size_t bytes, int device, CudaAllocation* out);

// Pins [ptr, ptr + bytes) and maps it for the GPU (cudaHostRegister, portable and mapped), made on
// `device` (-1: the calling thread's current device); *unpin undoes it. Fails (tsrInvalidUsage)
// where the GPU cannot use the host address itself: the device handles of FIFOs and semaphores
// pass host addresses of pinned memory to kernels.
Result cudaPinHostMemory(void* ptr, size_t bytes, std::function<void()>* unpin, int device = -1);

// The device a pointer lives on, or -1 with a reason when it is not CUDA device memory.
Result cudaPointerDevice(const void* ptr, int* device, std::string* why);

// Host access to a 64-bit word of device memory (the counters of GPU semaphores, when a host
// thread waits or signals): read, write, and a system-scope release add. Each runs on a
// process-wide non-blocking stream of the word's device and completes before it returns (at most
// a fixed 30 s), so it never waits for kernels of other streams: a kernel spinning on the word
// while a host thread of the same process adds to it is the normal case, and a device-wide
// synchronize would deadlock there. The add is therefore ordered after the caller's earlier
// writes that have completed (every host call of the transport completes its copies before it
// returns), not after unrelated work still running on the device.
Result cudaReadWord(const uint64_t* devicePtr, uint64_t* value);
Result cudaWriteWord(uint64_t* devicePtr, uint64_t value);
Result cudaAddWord(uint64_t* devicePtr, uint64_t value);

// For an allocation made by cudaAllocateShareable with VMM: its mapped size and granularity
// (what an importer reserves and maps). False for anything else.
bool cudaVmmAllocationInfo(const void* ptr, size_t* bytes, size_t* granularity);

// Tests only: make cudaAllocateShareable use cudaMalloc (legacy IPC handles) even where VMM with
// POSIX-FD handles is supported, so both export paths of cuda_ipc can be exercised on one GPU.
void cudaPreferLegacyAllocation(bool legacy);

}  // namespace tessera
