// The this-host preset's calibration (platform.hpp): what the host executor's moves cost on this
// machine, measured at start with the executor's own kernels. Each figure is the median of
// several rounds.
#pragma once

#include "collectives/sim/platform.hpp"
#include "core/status.hpp"

namespace tessera::sim {

struct Calibration {
  int cores = 1;          // CPUs this process may run on
  double copyGBs = 0;     // hostCopyBytes, one thread, 4 MiB blocks over a 64 MiB region
  double reduceGBs = 0;   // hostReduce float32 sum of two sources, bytes of output per second
  double signalUs = 0;    // half a round trip between two processes through a shared word
  double cacheBytes = 0;  // the last-level cache (sysfs), 0 when unknown
  // The same kernels on data another process has just written, in a buffer that fits the cache
  // (a twelfth of it): what a rank does with a peer's put.
  double cacheCopyGBs = 0;
  double cacheReduceGBs = 0;
  double seconds = 0;  // how long the calibration took
};

// Measures this machine (about a second; forks one process for the signal round trip).
Result calibrateThisHost(Calibration* out);

// The this-host machine with `ranks` ranks from a calibration.
Machine thisHostMachine(const Calibration& c, int ranks);

}  // namespace tessera::sim
