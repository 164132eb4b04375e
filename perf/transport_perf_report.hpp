// transport_perf, the output: the configuration header, one bandwidth and one latency table per
// transport with its reference side by side, and the same figures as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport_perf_baselines.hpp"
#include "transport_perf_ranks.hpp"

namespace tessera::perf {

struct Options {
  uint64_t minBytes = 8;
  uint64_t maxBytes = uint64_t{256} << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
  std::string transports = "inproc,shm,ucx";
  std::string ucxTls = "tcp";
  int puts = 0;  // 0: automatic
  uint64_t latencyMax = uint64_t{1} << 20;
  uint64_t budgetBytes = uint64_t{512} << 20;
  bool viaProxy = false;
  int basePort = 0;
  int perftestOutstanding = -1;  // ucx_perftest -O; -1: tessera's puts per iteration; 0: none
  double timeoutSeconds = 60;
  std::string jsonPath;
};

struct TransportResult {
  TransportRun run;
  std::string skipped;                  // not built into this library: why
  std::vector<StepTiming> memcpy;       // reference of inproc and shm
  std::vector<PerftestPoint> perftest;  // reference of ucx
};

void printHeader(const Options& o, const RankPlan& plan);
void printTransport(const TransportResult& r);
// False (with a message on stderr) when the file cannot be written.
bool writeJson(const std::string& path, const Options& o, const RankPlan& plan,
               const std::vector<TransportResult>& results);

}  // namespace tessera::perf
