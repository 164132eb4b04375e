// transport_perf, the measuring side: two ranks of one transport (threads for inproc, forked
// processes with a TCP bootstrap for shm and ucx) run the put-bandwidth and signal round-trip
// loops, and rank 0 reports what it timed. The sizes and iteration counts come from a plan that
// both ranks compute the same way, so no rank waits for a message the other will never send.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/types.hpp"

namespace tessera::perf {

// One size of the sweep, as both ranks run it.
struct SizeStep {
  uint64_t bytes = 0;
  uint32_t puts = 1;    // puts per iteration (back to back, then one flush + signal)
  uint32_t iters = 1;   // timed iterations
  uint32_t warmup = 0;  // untimed iterations before them
};

// What the ranks do and for how long.
struct RankPlan {
  std::vector<SizeStep> bandwidth;
  std::vector<SizeStep> latency;  // bytes 0: a bare signal round trip
  bool viaProxy = false;          // put/signal through a port channel (the proxy) instead of calls
  // Rank 0 also times memcpy from its source into a private buffer right after each size's puts
  // (same process, same source pages, same moment: the fair reference for inproc and shm).
  bool memcpyReference = false;
  double timeoutSeconds = 30;  // every transport wait
  double runSeconds = 900;     // the whole run; forked ranks still running then are killed
};

// Rank 0's timings of one step, in microseconds per iteration.
struct StepTiming {
  uint64_t bytes = 0;
  uint32_t puts = 0;
  uint32_t iters = 0;
  double medianUs = 0;
  double minUs = 0;
};

struct TransportRun {
  TransportKind kind = TransportKind::kInproc;
  std::string mode;   // "threads" or "processes"
  std::string error;  // empty when both ranks finished and checked their data
  std::vector<StepTiming> bandwidth;
  std::vector<StepTiming> latency;
  std::vector<StepTiming> memcpy;  // when plan.memcpyReference
};

// Runs the plan over `kind` on two ranks and returns rank 0's timings (or what went wrong, on
// either rank).
TransportRun runTransport(TransportKind kind, const RankPlan& plan);

}  // namespace tessera::perf
