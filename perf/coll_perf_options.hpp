// Command line of the collective perf binaries: nccl-tests' flags plus tessera's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coll_perf_common.hpp"

namespace tessera::perf {

// How per-rank times combine into the reported one (nccl-tests -a).
enum class Average { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

// A reduction as the command line names it; premulsum is created per communicator and type.
enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };

struct Options {
  uint64_t minBytes = 32u << 20;  // nccl-tests' defaults
  uint64_t maxBytes = 32u << 20;
  uint64_t stepBytes = 1u << 20;
  double stepFactor = 1;  // > 1: multiply; otherwise add stepBytes
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::vector<OpKind> ops{OpKind::kSum};
  std::vector<tsrDataType_t> types{tsrFloat32};
  int root = 0;  // -1: every root in turn
  int threads = 1;
  Average average = Average::kMean;
  std::string jsonPath;
  // tessera's own.
  bool device = false;           // -m device
  bool registerBuffers = false;  // -R 1
  std::string algo;              // -A: TESSERA_ALGO for the run
  std::string planPath;          // --plan
  bool mpiBaseline = false;      // --baseline mpi
  bool memcpyBaseline = false;   // --baseline memcpy: each rank copies its send to its recv buffer
  int graphLaunches = 0;  // -G (nccl-tests): the -n calls captured in a CUDA graph, run n times
  bool baseline() const { return mpiBaseline || memcpyBaseline; }
};

// Parses argv; on a bad flag prints why and the usage to stderr and exits with status 2.
Options parseOptions(int argc, char** argv, const CollHooks& hooks);

// The sizes of the sweep, in bytes.
std::vector<uint64_t> sweepSizes(const Options& o);

// nccl-tests' names: "int8" ... "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2".
const char* typeName(tsrDataType_t t);
// "sum", "prod", "max", "min", "avg", "premulsum".
const char* opKindName(OpKind k);

}  // namespace tessera::perf
