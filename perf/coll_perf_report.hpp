// Output of the collective perf binaries: nccl-tests' header, table and summary lines (printed
// by global rank 0 only), with the --baseline mpi columns appended, and the optional JSON file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coll_perf_common.hpp"
#include "coll_perf_options.hpp"

namespace tessera::perf {

// One of the row's two halves (out of place, in place).
struct VariantResult {
  bool ran = false;
  double timeUs = 0;  // per call, combined over ranks by -a
  double algbw = 0;   // GB/s
  double busbw = 0;
  int64_t wrong = -1;  // summed over ranks; -1: not checked
};

struct Row {
  uint64_t size = 0;  // bytes, as nccl-tests prints them
  size_t count = 0;   // the API's count
  tsrDataType_t type = tsrFloat32;
  const char* redop = "none";
  int root = -1;  // -1 for collectives without a root
  VariantResult outOfPlace;
  VariantResult inPlace;
  // --baseline mpi, timed interleaved with the out-of-place calls.
  bool mpiRan = false;
  double mpiTimeUs = 0;
  double mpiBusbw = 0;
  double ratio() const { return mpiBusbw > 0 ? outOfPlace.busbw / mpiBusbw : 0; }
};

struct RunInfo {
  std::string program;  // "all_reduce_perf"
  int nranks = 1;
  int nprocs = 1;
  int threads = 1;
  std::vector<std::string> rankLines;
  std::vector<std::string> notes;  // "# tessera: ..." lines: memory, registration, algorithm
};

void printHeader(const Options& o, const RunInfo& info);
// "mpi" (default) or "memcpy": what the baseline columns are called.
void setBaselineName(const char* name);
void printTableHeader(bool baseline);
void printRow(const Row& row, bool baseline);
// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", "#".
void printSummary(int64_t wrong, double avgBusbw);
// A "#" line printed between the header and the end (a skip reason, an error).
void printNote(const std::string& text);

// The rows as JSON; returns "" or why the file could not be written.
std::string writeJson(const std::string& path, const Options& o, const RunInfo& info,
                      const std::vector<Row>& rows, int64_t wrong, double avgBusbw);

}  // namespace tessera::perf
