// What every object of one TransportContext shares and may outlive the context: who this rank is,
// where every rank lives, the timeout, and whether the context is still alive. Memory,
// Connection, Semaphore and channels hold it; after the context is destroyed their calls fail
// with tsrInvalidArgument instead of touching freed state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "topology/placement.hpp"

namespace tessera {

struct ContextState {
  int rank = 0;
  int nranks = 0;
  uint64_t contextId = 0;  // equal on every rank of the context, different for every context
  int cudaDevice = -1;
  double timeoutSeconds = 0;
  std::vector<RankPlacement> placements;
  std::atomic<bool> alive{true};
  std::atomic<bool> aborted{false};

  // Registered memory, for finding the Memory that holds a raw pointer.
  std::mutex memoryMutex;
  std::vector<std::weak_ptr<class Memory>> memories;
};

}  // namespace tessera
