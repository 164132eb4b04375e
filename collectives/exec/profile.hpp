// Where the host executor's time goes (TESSERA_PROFILE=1): per op kind the time spent running
// ops of that kind and how often they ran, and per call its wall time from its first step to its
// end, so that wall time minus op time is what the calls spent waiting for peers. One line per
// rank goes to standard error when the communicator is destroyed. It answers whether a slow run
// was slow in its copies and reductions (memory) or in its waits (a peer, the scheduler), which
// launch-level slowdowns need told apart. Off by default: profiling reads the clock twice per op.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

struct ExecProfile {
  static constexpr int kKinds = 9;  // exec::kExecPut .. kExecBarrier
  uint64_t opNs[kKinds] = {};
  uint64_t opCount[kKinds] = {};
  uint64_t calls = 0;
  uint64_t callNs = 0;     // wall time of the calls, first step to end
  uint64_t dataBytes = 0;  // bytes the data ops wrote (dst and dst2)
  // The thread's waits over the engine's life (src/core/park.hpp), at the start and now.
  uint64_t parksAtStart = 0, parkedNsAtStart = 0;

  // "rank 0: 40 calls in 52.1 ms; put 10.2 ms (1200), ..., waits and overhead 12.0 ms; ..."
  std::string summary(int rank) const;
};

// TESSERA_PROFILE, read once per process.
bool execProfiling();

}  // namespace tessera
