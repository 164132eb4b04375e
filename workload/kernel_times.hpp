// Measured kernel times for the workload simulator (DESIGN.md, "Workloads"; docs/WORKLOADS.md,
// "The compute model against a GPU"): the medians that perf/gpu_model_check.py's `measure` step
// writes to measured.json on a lent GPU, keyed by what the compute model keys an op by. With them
// (tessera_sim --kernel-times), a GEMM or memory-bound op whose shape was measured takes its
// measured time (plus the preset's launch gap, which the measurement, one kernel between two
// events, does not hold) instead of the model's; every other op keeps the model. Beside a
// collective a measured kernel slows by the model's own ratio (its time with the collective's
// CTAs and bandwidth taken over its time alone), so interference stays modelled.
//
// The file: {"device": "...", "ops": [{"key": ["gemm", m, n, k, batch], "us": [median, min,
// max], ...}, {"key": ["memory", bytes], "us": [...]}, ...], ...}; other fields are ignored (it
// is gpu_model_check's output, not a format of its own). GEMMs were timed in bf16 and are used
// for bf16 and fp16 ops only; a shape measured more than once takes the mean of its medians.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "core/status.hpp"
#include "workload/workload.hpp"

namespace tessera::workload {

struct KernelTimes {
  std::string device;  // the GPU that measured them (the file's "device")
  std::map<std::array<uint64_t, 4>, double> gemmUs;  // (m, n, k, batch) -> microseconds
  std::map<uint64_t, double> memoryUs;               // bytes (truncated) -> microseconds
  // The measured time of a compute op, microseconds without launch; < 0 when it was not measured.
  double find(const Op& op) const;
  size_t size() const { return gemmUs.size() + memoryUs.size(); }
};

// Parses measured.json's text; `where` names it in errors. Refuses with a sentence: text that is
// not JSON, no "ops" array, an entry without a known key or with a time that is not a positive
// finite number.
Result kernelTimesFromJson(const std::string& text, const std::string& where, KernelTimes* out);
Result readKernelTimesFile(const std::string& path, KernelTimes* out);

}  // namespace tessera::workload
