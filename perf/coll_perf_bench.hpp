// The sweep one rank runs: for each type, op, root and size, the out-of-place and in-place
// calls (timed, then checked), with MPI's collective timed beside the out-of-place ones under
// --baseline mpi. Ranks meet only in RankGroup calls, which every rank makes in the same order
// whatever happened, so a failing rank never leaves its peers waiting in a barrier.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coll_perf_common.hpp"
#include "coll_perf_options.hpp"
#include "coll_perf_ranks.hpp"
#include "coll_perf_report.hpp"
#include "collectives/plan/plan.hpp"

namespace tessera::perf {

// What the ranks of one process share.
struct Shared {
  Shared(const Options& options, const CollHooks& collHooks, const World& w)
      : o(options), hooks(collHooks), world(w), group(w) {}
  const Options& o;
  const CollHooks& hooks;
  World world;
  RankGroup group;
  std::shared_ptr<const Plan> plan;  // --plan: what every call runs
  std::vector<tsrComm_t> comms;      // per thread of this process (null until made)
  std::vector<int> devices;          // CUDA device per thread, -1 for host ranks
  std::vector<void*> streams;        // CUDA stream per thread (-m device), else null
  size_t bufferBytes = 0;            // of each of a rank's two buffers
  // Written by global rank 0 only.
  std::vector<Row> rows;
  int64_t wrong = 0;
  double busbwSum = 0;
  int busbwCount = 0;
  int status = 0;  // exit status, agreed by all ranks
};

// Runs rank `thread` of this process through the whole sweep (the communicator must exist).
void runRank(Shared& s, int thread);

// Bytes each buffer of a rank needs for the largest step of the sweep.
size_t largestBufferBytes(const Options& o, const CollHooks& hooks, int nranks);

}  // namespace tessera::perf
