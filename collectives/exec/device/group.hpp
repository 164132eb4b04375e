// The cooperating threads that execute one plan worker together (DESIGN.md, "Executors"): a CTA
// on the GPU, one host thread in the host-thread emulation of the device executor. The scheduler
// (work_queue.hpp) and the device backend (device_backend.hpp) are written against this small
// interface, so the CPU test suite runs the very loop the GPU runs.
//
//   uint32_t rank() / size()   this thread's index in the group, the group's thread count
//   bool leader()              rank() == 0: the one thread that polls flags and writes counters
//   void sync()                every thread of the group reached this point; memory written
//                              before it by any thread of the group is visible after it to all
//   T broadcast(T v)           every thread returns the leader's v (T trivially copyable, <= 16 B)
//
// Control decisions (blocked or not, failed or not) are made by the leader and broadcast, so that
// every thread of a group takes the same branch and reaches the same sync() calls.
#pragma once

#include <stdint.h>

#include "tessera/device/host_device.hpp"

namespace tessera::exec {

// One host thread (the emulation, and the scheduler tests).
struct HostGroup {
  uint32_t rank() const { return 0; }
  uint32_t size() const { return 1; }
  bool leader() const { return true; }
  void sync() const {}
  template <class T>
  T broadcast(T v) const {
    return v;
  }
};

#if defined(__CUDACC__)
// A CTA (1-D block). broadcast() goes through a shared slot; every thread must call it.
struct BlockGroup {
  __device__ uint32_t rank() const { return threadIdx.x; }
  __device__ uint32_t size() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
  template <class T>
  __device__ T broadcast(T v) const {
    static_assert(sizeof(T) <= 16, "broadcast of a small value only");
    __shared__ alignas(16) unsigned char slot[16];
    if (threadIdx.x == 0) *reinterpret_cast<T*>(slot) = v;
    __syncthreads();
    T r = *reinterpret_cast<const T*>(slot);
    __syncthreads();
    return r;
  }
};
#endif

}  // namespace tessera::exec
