// Waits and signals of the fused kernels (included by the .cu files only): every wait has the
// call's deadline, records the first timeout in the rank's error record and returns false, and
// returns false at once when an earlier wait of this rank already failed, so a dead peer costs
// one deadline, not one per tile.
#pragma once

#include "core/cuda/fault_words.hpp"
#include "fused/device/fused_params.hpp"
#include "tessera/device/atomics.hpp"

namespace tessera::fused {

__device__ inline uint64_t* wordAt(char* base, uint64_t offset) {
  return reinterpret_cast<uint64_t*>(base + offset);
}

__device__ inline bool fusedFailed(const FusedParams& p) {
  return device::loadRelaxed32(&p.error->code) != 0;
}

__device__ inline void recordTimeout(const FusedParams& p, uint32_t kernel, uint32_t wait,
                                     int32_t peer, uint32_t index, uint64_t expected, uint64_t seen,
                                     uint64_t call) {
  // The claim is device memory: atomics on mapped host memory are not atomic over PCIe.
  if (atomicCAS(&p.control->claim, 0u, 1u) != 0u) return;
  FusedErrorRecord* e = p.error;
  e->kernel = kernel;
  e->wait = wait;
  e->peer = peer;
  e->index = index;
  e->expected = expected;
  e->seen = seen;
  e->callIndex = call;
  __threadfence_system();
  device::storeRelease32(&e->code, 1u);
}

// One thread: until *word >= target (acquire), the deadline, or an earlier failure of this rank.
__device__ inline bool waitWord(const FusedParams& p, const uint64_t* word, uint64_t target,
                                uint32_t kernel, uint32_t wait, int32_t peer, uint32_t index,
                                uint64_t call) {
  if (device::loadAcquire(word) >= target) return true;
  const uint64_t start = device::clockNs();
  for (uint32_t iter = 0;; ++iter) {
    const uint64_t seen = device::loadAcquire(word);
    if (seen >= target) return true;
    if ((iter & 63) == 0) {
      if (fusedFailed(p)) return false;
      if (device::clockNs() - start > p.timeoutNs) {
        recordTimeout(p, kernel, wait, peer, index, target, seen, call);
        return false;
      }
    }
    device::backoff(iter);
  }
}

// One thread, after a __syncthreads() that follows the CTA's stores: makes them visible at
// system scope, then adds 1 to the word (release), which a reader acquires before it reads.
__device__ inline void signalAfterStores(uint64_t* word) {
  __threadfence_system();
  device::fetchAddRelease(word, 1);
}

}  // namespace tessera::fused
