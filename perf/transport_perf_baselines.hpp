// transport_perf, the reference for ucx (DESIGN.md, principle 6): ucx_perftest (ucp_put_bw, a
// server/client pair on loopback) with the same sizes and message counts. (The memcpy reference
// of inproc and shm is timed by rank 0 itself, see transport_perf_ranks.hpp.)
#pragma once

#include <string>
#include <vector>

#include "transport_perf_ranks.hpp"

namespace tessera::perf {

struct PerftestPoint {
  uint64_t bytes = 0;
  double gbps = 0;    // overall bandwidth, 1e9 bytes per second
  std::string error;  // empty when it ran and its output parsed
};

struct PerftestOptions {
  std::string program = "ucx_perftest";
  int basePort = 0;  // one port per size, counting up from here
  // ucx_perftest -O (puts in flight at most); -1: tessera's puts per iteration at that size;
  // 0: ucx_perftest's default (no limit).
  int outstanding = -1;
  double timeoutSeconds = 120;
};

// ucx_perftest -t ucp_put_bw for each step with iterations * puts messages (UCX_TLS is taken
// from the environment, as tessera's own ranks take it).
std::vector<PerftestPoint> runUcxPerftest(const std::vector<SizeStep>& steps,
                                          const PerftestOptions& options);

// Parses ucx_perftest's -v (CSV) output: the overall bandwidth of its last result line, in MB/s
// (ucx_perftest's MB is 2^20 bytes). False when there is no such line.
bool parsePerftestCsv(const std::string& output, double* overallMBps);

}  // namespace tessera::perf
