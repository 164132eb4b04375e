// Kernels of the GPU transport tests, behind host functions so the test bodies need no CUDA
// header: each returns "" on success or a sentence saying what failed. Building
// gpu_transport_kernels.cu is also the compile check of the device handles
// (include/tessera/device/device.hpp) with nvcc for every TESSERA_CUDA_ARCHS.
//
// Without CUDA in the build every function returns "CUDA was not built in".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/device/device.hpp"

namespace tessera::test {

// Copies between any two pointers unified addressing knows (device, pinned or pageable host) on
// a non-blocking stream of `device`, waiting at most `seconds`.
std::string gpuCopy(int device, void* dst, const void* src, size_t bytes, double seconds);

// One block per handle (one peer each), all blocks at once, on `device`. Block b, with the
// local memory laid out in slots of n bytes (see gpu_transport_body.cpp):
//   cooperative put of local slot 1 into the peer's slot 5, signal, wait for the peer's;
//   cooperative get of the peer's slot 1 into local slot 6, signal, wait;
//   `rounds` signal/wait ping-pongs; a single-thread putWithSignal of the first `tail` bytes
//   of slot 1 into the peer's slot 8, wait; an out-of-range put must be refused.
std::string runMemoryChannelKernel(int device,
                                   const std::vector<device::MemoryChannelDeviceHandle>& handles,
                                   uint64_t n, uint64_t tail, int rounds, double seconds);

// One block per handle, thread 0 of each: putWithSignal of local slot 2 into the peer's slot 7
// through the proxy, flush, wait for the peer's signal; an out-of-range put must be refused.
std::string runPortChannelKernel(int device,
                                 const std::vector<device::PortChannelDeviceHandle>& handles,
                                 uint64_t n, double seconds);

// A FIFO and semaphore round trip without a proxy: one kernel pushes `count` triggers into a
// FifoDeviceHandle in pinned host memory while this thread pops them like a proxy (checking
// order and contents); then the kernel adds to a semaphore counter that this thread acquires.
std::string runFifoAndSemaphoreKernel(int device, uint32_t count, double seconds);

}  // namespace tessera::test
