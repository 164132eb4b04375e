// The workload simulator's engine (DESIGN.md, "Workloads"): runs a workload's ranks on a GPU
// model (compute.hpp) and a machine (collectives/sim/platform.hpp) and reports the step.
//
// How it runs (a fluid discrete-event simulation):
// - an op starts when its stream's previous op and its `after` ops have ended; a collective or
//   fused op when every member of its group has reached it; a send and its recv together;
// - a compute op's time comes from compute.hpp, or from measured kernel times where its shape was
//   measured (kernel_times.hpp); several compute ops on one GPU share it equally;
//   while a collective of the rank runs beside it, the kernel runs on the SMs the collective's
//   CTAs leave and the memory bandwidth its copies leave (its rate drops to the ratio of the two
//   times);
// - a collective's time is what tessera runs for it on the machine: the tuner's choice for device
//   buffers (or windows), simulated by collectives/sim on SimGrid for a machine shaped like the
//   group (its size and node span), once per distinct (collective, size, span, bytes) and reused;
//   above `maxSimulatedBytes` a call is the simulated time of that size scaled by its bytes;
// - between nodes, collectives and sends that are running at once on one NIC share it: each
//   progresses at 1 / (the ops on its busiest NIC), so data-parallel traffic beside pipeline
//   sends slows both down;
// - a send or recv takes the route's latency plus its bytes over the narrowest link;
// - a fused op takes the fused layer's own tile order through fused/sim/fused_model.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/sim/platform.hpp"
#include "core/status.hpp"
#include "workload/compute.hpp"
#include "workload/kernel_times.hpp"
#include "workload/workload.hpp"

namespace tessera::workload {

inline constexpr int kDeviceCtasForWorkload = 8;  // the device executor's grid (kDeviceCtas)

struct EngineOptions {
  bool registered = false;  // collectives on windows (zero-copy plans may be chosen)
  int commSms = 8;          // a collective's CTAs (the device executor's grid)
  uint64_t maxSimulatedBytes = 1ull << 30;
  bool nicContention = true;  // off: every op has its NICs to itself
  bool keepTimeline = true;   // op start/end per rank (the trace needs it)
  // Collective times by key, to skip SimGrid (tests with closed forms set this):
  // microseconds = fixedCollectiveUs when >= 0.
  double fixedCollectiveUs = -1;
  // A researcher's algorithm instead of the device choice: `plan` for every collective of its
  // kind whose group has its number of ranks (a plan file: tessera_plan generate, or by hand);
  // otherwise, when `algorithm` is set, that generator family (with `workers`, `zeroCopy`) for
  // every collective it can make. The rest keep the device choice.
  std::shared_ptr<const Plan> plan;
  std::string algorithm;
  int workers = kDeviceCtasForWorkload;
  bool zeroCopy = false;
  // Measured kernel times (kernel_times.hpp): a GEMM or memory-bound op of a measured shape takes
  // its measurement plus the preset's launch gap; the rest keep the model.
  std::shared_ptr<const KernelTimes> kernelTimes;
  // The GEMMs' main-loop rate instead of the preset's (0: the preset's): a share of the peak,
  // itself a ceiling, or, with a shape (M, N, K), the share one GEMM of that shape was measured
  // at, from which simulateWorkload derives the rate (gemmCalibrate, compute.hpp): the same GPU
  // with another generation of its libraries.
  double gemmEfficiency = 0;
  uint64_t gemmEfficiencyM = 0, gemmEfficiencyN = 0, gemmEfficiencyK = 0;
  // The GEMM's fixed cost per kernel and per wave instead of the preset's (negative: the
  // preset's), for refitting them on a table of measured kernels (perf/sim_gemm_validate.py).
  double gemmFixedUs = -1, gemmWaveUs = -1;
  // The attention kernels' share of the peak instead of the preset's (0: the preset's), as for
  // FlashAttention's first version (25-40% of the A100's peak, against the preset's FA-2).
  double attentionEfficiency = 0;
};

struct OpSpan {
  double start = 0, end = 0;
};

struct RankStats {
  double computeUs = 0;  // time with at least one compute op running
  double commUs = 0;     // time with at least one communication op running
  double exposedUs = 0;  // communication running and no compute
  double flops = 0;      // executed by this rank (one GPU of it)
};

struct CollectiveCost {
  std::string what;  // "allreduce n8 x1 node 16777216 B"
  std::string plan;  // the plan tessera runs
  double us = 0;
  int calls = 0;
};

struct StepReport {
  double stepUs = 0;
  double flopsPerGpu = 0;  // the model's FLOPs (or executed) per GPU
  double tflopsPerGpu = 0;
  double percentOfPeak = 0;  // of the GPU's dense peak for bf16
  double exposedUs = 0;      // the rank with the most exposed communication
  double exposedMeanUs = 0;  // weighted by the ranks' weights
  std::vector<RankStats> ranks;
  std::vector<std::vector<OpSpan>> timeline;  // [rank][op]
  std::vector<CollectiveCost> collectives;
  uint64_t events = 0;
  uint64_t computeOps = 0;   // compute ops run (every rank)
  uint64_t measuredOps = 0;  // of them, timed from EngineOptions::kernelTimes
  double wallSeconds = 0;
  double collectiveSeconds = 0;  // host time of the collectives' simulations
};

// Runs the workload; the GPU and machine come from its "gpu" and "platform" (nodes from it).
Result simulateWorkload(const Workload& w, const EngineOptions& opt, StepReport* out);
// Same, on a given GPU model and machine (tests, machine files).
Result simulateWorkloadOn(const Workload& w, const GpuModel& gpu, const sim::Machine& machine,
                          const EngineOptions& opt, StepReport* out);

// The timeline as a Chrome trace (chrome://tracing, Perfetto): a process per rank, a thread per
// stream, one complete event per op.
std::string chromeTrace(const Workload& w, const StepReport& rep);

}  // namespace tessera::workload
