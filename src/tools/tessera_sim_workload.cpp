// tessera_sim --workload: a training or inference step simulated (workload/, DESIGN.md
// "Workloads"). Exit codes as tessera_sim's: 0 ok, 1 simulation or I/O failure, 2 usage.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "collectives/plan/plan_json.hpp"
#include "core/log.hpp"
#include "tessera_sim_cli.hpp"
#include "workload/engine.hpp"
#include "workload/transformer.hpp"

namespace {

using namespace tessera;
using namespace tessera::workload;

using simcli::kExitFailed;
using simcli::kExitOk;
using simcli::kExitUsage;

constexpr const char* kUsage =
    "usage: tessera_sim --workload FILE [options]\n"
    "       tessera_sim --workload gpt --layers L --hidden H --heads A --seq S [model options]\n"
    "  Simulates a step: computation on a GPU model, tessera's collectives on the machine\n"
    "  (collectives/sim), the fused operations through the fused layer's tile order. Prints the\n"
    "  step time, TFLOP/s per GPU and percent of peak, exposed communication, the collectives.\n"
    "  FILE          a workload (JSON, docs/WORKLOADS.md)\n"
    "  gpt           a GPT step from the model options:\n"
    "    --layers --hidden --heads --seq --vocab (51200) --ffn (4 x hidden)\n"
    "    --micro-batch (1) --global-batch (8) --tp (1) --pp (1) --dp (1)\n"
    "    --sp              sequence parallelism   --recompute  full activation recomputation\n"
    "    --recompute-selective  attention's core only (QK^T, softmax, dropout, PV; Megatron-LM's\n"
    "                      selective; its FLOPs not counted, as model FLOPs)\n"
    "    --interleave V    V model chunks per pipeline stage (the interleaved 1F1B schedule)\n"
    "    --flash           attention as one kernel (default: batched GEMMs and a softmax)\n"
    "    --schedule S      TP communication: serial (Megatron-LM), domino, fused\n"
    "    --domino-split N  Domino's parts (2)\n"
    "    --zero            DP as ZeRO: reduce-scatter gradients, all-gather parameters\n"
    "    --dp-overlap      each layer's gradients reduced as its backward ends\n"
    "    --grad-bytes B    gradients reduced in 4 (fp32, default) or 2 bytes (fp16/bf16)\n"
    "    --optimizer-bytes B  the optimizer step's memory traffic per parameter (30: one fused\n"
    "                      Adam kernel; Megatron-LM's mixed-precision step moves more)\n"
    "    --grad-accum-bytes B  gradient accumulation as a kernel of its own: bytes per parameter\n"
    "                      for each micro-batch after the first (0, default: inside the GEMM)\n"
    "    --pp-scatter-gather  pipeline sends of 1/TP each, all-gathered over TP on arrival\n"
    "    --pp-blocking     compute waits for each pipeline send (Megatron-LM 2021's exchanges)\n"
    "    --tp-async-backward  a column-parallel layer's input-gradient all-reduce (or\n"
    "                      reduce-scatter) beside its weight-gradient GEMM (Megatron-LM)\n"
    "    --inference       forward passes only (a prefill of every micro-batch)\n"
    "    --decode N        with --inference: then N tokens generated per sequence\n"
    "    --gpu G           a100, a800, h100 (default), h800, h200\n"
    "    --platform P      dgx-h100 (default), dgx-a100, hgx-a800, hgx-h200, hgx-h800\n"
    "    --unfold          simulate every GPU instead of one rank per pipeline stage\n"
    "    --sweep           every TP x PP x DP of the same GPUs (TP within a node), a table\n"
    "    --compare-schedules  serial, domino and fused side by side\n"
    "  --registered      collectives on windows (zero-copy plans)\n"
    "  --algo A          collectives by the generator family A instead of the device choice\n"
    "                    (ring, tree, rhd, oneshot, twoshot, hier...; with --workers W and\n"
    "                    --zero-copy); one it cannot make keeps the device choice\n"
    "  --plan FILE       a plan file for the collectives of its kind and number of ranks\n"
    "  --no-contention   ops crossing one NIC at once do not share it\n"
    "  --gemm-efficiency F[@MxNxK]  GEMMs' main loops at F (0 < F <= 1) of the peak, or at the\n"
    "                    rate that takes a GEMM of M x N x K measured at F its measured time,\n"
    "                    instead of the preset's: the GPU with another generation of libraries\n"
    "  --gemm-overheads FIXED,WAVE  a GEMM's fixed cost per kernel and per wave (us) instead of\n"
    "                    the preset's (2.25, 1.9), to refit them on measured kernels\n"
    "  --attention-efficiency F  attention kernels (--flash) at F of the peak instead of the\n"
    "                    preset's FlashAttention-2 (61.5%)\n"
    "  --kernel-times FILE  measured.json of perf/gpu_model_check.py: GEMMs and memory-bound\n"
    "                    ops of a measured shape take their measured time, the rest the model\n"
    "  --trace FILE      the timeline as a Chrome trace (Perfetto, chrome://tracing)\n"
    "  --write FILE      the workload as JSON\n"
    "  --csv FILE        the sweep's or comparison's rows as CSV (perf/plot_workload.py plots it)\n"
    "exit codes: 0 ok, 1 simulation or I/O failure, 2 usage\n";

int usage(const std::string& why) { return simcli::usage(why, kUsage); }
using simcli::failed;
using simcli::parseInt;
bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

struct Row {
  std::string label;
  TransformerSpec spec;
  StepReport rep;
};

void printReport(const Workload& w, const StepReport& r, const EngineOptions& opt) {
  std::printf("# workload %s: %zu simulated ranks standing for %d GPUs (%s on %s, %d nodes)\n",
              w.name.c_str(), w.ranks.size(), w.totalGpus(), w.gpu.c_str(), w.platform.c_str(),
              w.nodes);
  if (opt.gemmEfficiency > 0 && opt.gemmEfficiencyM > 0)
    std::printf(
        "# GEMMs calibrated on one of %llu x %llu x %llu at %.1f%% of the peak "
        "(--gemm-efficiency), not the preset's\n",
        static_cast<unsigned long long>(opt.gemmEfficiencyM),
        static_cast<unsigned long long>(opt.gemmEfficiencyN),
        static_cast<unsigned long long>(opt.gemmEfficiencyK), 100 * opt.gemmEfficiency);
  else if (opt.gemmEfficiency > 0)
    std::printf("# GEMMs' main loops at %.1f%% of the peak (--gemm-efficiency), not the preset's\n",
                100 * opt.gemmEfficiency);
  if (opt.gemmFixedUs >= 0)
    std::printf("# GEMMs' overheads %.2f us a kernel and %.2f us a wave (--gemm-overheads)\n",
                opt.gemmFixedUs, opt.gemmWaveUs);
  if (opt.attentionEfficiency > 0)
    std::printf("# attention at %.1f%% of the peak (--attention-efficiency), not the preset's\n",
                100 * opt.attentionEfficiency);
  std::printf("step time            %12.3f ms\n", r.stepUs / 1e3);
  std::printf("TFLOP/s per GPU      %12.1f (%.1f%% of the bf16 dense peak; %s FLOPs)\n",
              r.tflopsPerGpu, r.percentOfPeak, w.modelFlops > 0 ? "the model's" : "executed");
  std::printf(
      "exposed comm         %12.3f ms on the most exposed rank, %.3f ms mean (%.1f%% of "
      "the step)\n",
      r.exposedUs / 1e3, r.exposedMeanUs / 1e3,
      r.stepUs > 0 ? 100 * r.exposedMeanUs / r.stepUs : 0.0);
  std::printf("# collectives (simulated once each, the plan tessera runs):\n");
  for (const CollectiveCost& c : r.collectives)
    std::printf("#   %-52s %10.1f us  x%-6d %s\n", c.what.c_str(), c.us, c.calls, c.plan.c_str());
  if (opt.kernelTimes)
    std::printf(
        "# kernel times: %llu of %llu compute ops measured (on %s; the preset is %s), the "
        "rest modelled\n",
        static_cast<unsigned long long>(r.measuredOps),
        static_cast<unsigned long long>(r.computeOps),
        opt.kernelTimes->device.empty() ? "an unnamed device" : opt.kernelTimes->device.c_str(),
        w.gpu.c_str());
  std::printf("# %llu events in %.2f s (collectives' simulations %.2f s)\n",
              static_cast<unsigned long long>(r.events), r.wallSeconds, r.collectiveSeconds);
}

}  // namespace

int workloadMain(int argc, char** argv) {
  TransformerSpec sp;
  std::string source, traceFile, writeTo, csvFile;
  EngineOptions opt;
  bool sweep = false, compareSchedules = false, platformGiven = false;
  int bytesArg = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = nullptr;
    auto value = [&]() {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    auto intArg = [&](long lo, long hi, int* out) {
      if (!value()) return false;
      return parseInt(v, lo, hi, out);
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return kExitOk;
    } else if (a == "--workload") {
      if (!value()) return usage("--workload needs a file or gpt");
      source = v;
      if (source == "--help" || source == "-h") {  // tessera_sim --help says to ask so
        std::printf("%s", kUsage);
        return kExitOk;
      }
    } else if (a == "--sp") {
      sp.sequenceParallel = true;
    } else if (a == "--recompute") {
      sp.recompute = true;
    } else if (a == "--recompute-selective") {
      sp.recomputeSelective = true;
    } else if (a == "--flash") {
      sp.flashAttention = true;
    } else if (a == "--zero") {
      sp.dpMode = DpMode::kZero;
    } else if (a == "--dp-overlap") {
      sp.dpOverlap = true;
    } else if (a == "--grad-bytes") {
      if (!intArg(2, 4, &sp.gradBytes) || sp.gradBytes == 3)
        return usage("--grad-bytes: expected 2 or 4");
    } else if (a == "--optimizer-bytes") {
      if (!intArg(0, 1024, &bytesArg)) return usage("--optimizer-bytes: expected 0..1024");
      sp.optimizerBytes = bytesArg;
    } else if (a == "--grad-accum-bytes") {
      if (!intArg(0, 1024, &bytesArg)) return usage("--grad-accum-bytes: expected 0..1024");
      sp.gradAccumBytes = bytesArg;
    } else if (a == "--pp-scatter-gather") {
      sp.ppScatterGather = true;
    } else if (a == "--tp-async-backward") {
      sp.tpAsyncBackward = true;
    } else if (a == "--pp-blocking") {
      sp.ppBlocking = true;
    } else if (a == "--inference") {
      sp.inference = true;
    } else if (a == "--unfold") {
      sp.unfold = true;
    } else if (a == "--sweep") {
      sweep = true;
    } else if (a == "--compare-schedules") {
      compareSchedules = true;
    } else if (a == "--registered") {
      opt.registered = true;
    } else if (a == "--zero-copy") {
      opt.zeroCopy = true;
    } else if (a == "--algo") {
      if (!value()) return usage("--algo needs a family");
      opt.algorithm = v;
    } else if (a == "--plan") {
      if (!value()) return usage("--plan needs a file");
      auto plan = std::make_shared<Plan>();
      if (readPlanFile(v, plan.get()) != tsrSuccess) return failed("--plan");
      opt.plan = plan;
    } else if (a == "--workers") {
      if (!intArg(1, 64, &opt.workers)) return usage("--workers: expected 1..64");
    } else if (a == "--kernel-times") {
      if (!value()) return usage("--kernel-times needs a file");
      auto kt = std::make_shared<KernelTimes>();
      if (readKernelTimesFile(v, kt.get()) != tsrSuccess) return failed("--kernel-times");
      opt.kernelTimes = kt;
    } else if (a == "--no-contention") {
      opt.nicContention = false;
    } else if (a == "--gemm-efficiency") {
      // F, or F@MxNxK: the measured GEMM's share of the peak and its shape.
      if (!value()) return usage("--gemm-efficiency: expected F or F@MxNxK");
      std::string f = v, shape;
      if (const size_t at = f.find('@'); at != std::string::npos) {
        shape = f.substr(at + 1);
        f.resize(at);
      }
      if (!simcli::parseFraction(f.c_str(), 0, 1, &opt.gemmEfficiency))
        return usage("--gemm-efficiency: expected a share of the peak in (0, 1]");
      if (!shape.empty()) {
        unsigned long long m = 0, n = 0, k = 0;
        char tail = 0;
        if (std::sscanf(shape.c_str(), "%llux%llux%llu%c", &m, &n, &k, &tail) != 3 || m == 0 ||
            n == 0 || k == 0 || m > (1ull << 24) || n > (1ull << 24) || k > (1ull << 24))
          return usage("--gemm-efficiency: expected the shape as MxNxK, each 1..16777216");
        opt.gemmEfficiencyM = m;
        opt.gemmEfficiencyN = n;
        opt.gemmEfficiencyK = k;
      }
    } else if (a == "--gemm-overheads") {
      double fixed = -1, wave = -1;
      char tail = 0;
      if (!value() || std::sscanf(v, "%lf,%lf%c", &fixed, &wave, &tail) != 2 ||
          !(fixed >= 0 && fixed <= 1e4) || !(wave >= 0 && wave <= 1e4))
        return usage("--gemm-overheads: expected FIXED,WAVE in microseconds (0..10000 each)");
      opt.gemmFixedUs = fixed;
      opt.gemmWaveUs = wave;
    } else if (a == "--attention-efficiency") {
      if (!value() || !simcli::parseFraction(v, 0, 1, &opt.attentionEfficiency))
        return usage("--attention-efficiency: expected a share of the peak in (0, 1]");
    } else if (a == "--layers") {
      if (!intArg(1, 100000, &sp.layers)) return usage("--layers: expected 1..100000");
    } else if (a == "--hidden") {
      if (!intArg(1, 1 << 20, &sp.hidden)) return usage("--hidden: expected a size");
    } else if (a == "--heads") {
      if (!intArg(1, 1 << 16, &sp.heads)) return usage("--heads: expected a count");
    } else if (a == "--ffn") {
      if (!intArg(1, 1 << 22, &sp.ffn)) return usage("--ffn: expected a size");
    } else if (a == "--seq") {
      if (!intArg(1, 1 << 24, &sp.seq)) return usage("--seq: expected a length");
    } else if (a == "--vocab") {
      if (!intArg(1, 1 << 24, &sp.vocab)) return usage("--vocab: expected a size");
    } else if (a == "--micro-batch") {
      if (!intArg(1, 1 << 20, &sp.microBatch)) return usage("--micro-batch: expected a count");
    } else if (a == "--global-batch") {
      if (!intArg(1, 1 << 24, &sp.globalBatch)) return usage("--global-batch: expected a count");
    } else if (a == "--tp") {
      if (!intArg(1, 1 << 16, &sp.tp)) return usage("--tp: expected a count");
    } else if (a == "--pp") {
      if (!intArg(1, 1 << 16, &sp.pp)) return usage("--pp: expected a count");
    } else if (a == "--dp") {
      if (!intArg(1, 1 << 20, &sp.dp)) return usage("--dp: expected a count");
    } else if (a == "--decode") {
      if (!intArg(0, 1 << 20, &sp.decodeTokens)) return usage("--decode: expected a count");
    } else if (a == "--interleave") {
      if (!intArg(1, 1024, &sp.interleave)) return usage("--interleave: expected 1..1024");
    } else if (a == "--domino-split") {
      if (!intArg(1, 64, &sp.dominoSplit)) return usage("--domino-split: expected 1..64");
    } else if (a == "--schedule") {
      if (!value() || tpScheduleParse(v, &sp.schedule) != tsrSuccess)
        return usage("--schedule: expected serial, domino or fused");
    } else if (a == "--gpu") {
      if (!value()) return usage("--gpu needs a value");
      sp.gpu = v;
    } else if (a == "--platform") {
      if (!value()) return usage("--platform needs a value");
      sp.platform = v;
      platformGiven = true;
    } else if (a == "--trace") {
      if (!value()) return usage("--trace needs a file");
      traceFile = v;
    } else if (a == "--write") {
      if (!value()) return usage("--write needs a file");
      writeTo = v;
    } else if (a == "--csv") {
      if (!value()) return usage("--csv needs a file");
      csvFile = v;
    } else {
      return usage("unknown option " + a + " (with --workload)");
    }
  }
  if (source.empty()) return usage("--workload needs a file or gpt");
  if (source != "gpt") {
    Workload w;
    if (readWorkloadFile(source, &w) != tsrSuccess) return failed("--workload");
    StepReport r;
    opt.keepTimeline = !traceFile.empty();
    if (simulateWorkload(w, opt, &r) != tsrSuccess) return failed("simulation");
    printReport(w, r, opt);
    if (!traceFile.empty() && !writeFile(traceFile, chromeTrace(w, r))) {
      std::fprintf(stderr, "tessera_sim: --trace %s: cannot write\n", traceFile.c_str());
      return kExitFailed;
    }
    return kExitOk;
  }
  if (!platformGiven) {
    // The platform of the GPU's own DGX / HGX node.
    if (sp.gpu == "a100") sp.platform = "dgx-a100";
    if (sp.gpu == "a800") sp.platform = "hgx-a800";
    if (sp.gpu == "h800") sp.platform = "hgx-h800";
    if (sp.gpu == "h200") sp.platform = "hgx-h200";
  }
  sp.name = "gpt-l" + std::to_string(sp.layers) + "-h" + std::to_string(sp.hidden);
  std::vector<Row> rows;
  if (sweep) {
    const int gpus = sp.gpus();
    for (int tp = 1; tp <= sp.gpusPerNode; tp *= 2)
      for (int pp = 1; pp <= sp.layers && tp * pp <= gpus; ++pp) {
        if (gpus % (tp * pp) != 0 || sp.layers % pp != 0) continue;
        TransformerSpec s = sp;
        s.tp = tp;
        s.pp = pp;
        s.dp = gpus / (tp * pp);
        if (s.globalBatch % (s.microBatch * s.dp) != 0 || s.heads % tp != 0) continue;
        rows.push_back(
            {"tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " dp" + std::to_string(s.dp),
             s,
             {}});
      }
  } else if (compareSchedules) {
    for (TpSchedule t : {TpSchedule::kSerial, TpSchedule::kDomino, TpSchedule::kFused}) {
      TransformerSpec s = sp;
      s.schedule = t;
      rows.push_back({tpScheduleName(t), s, {}});
    }
  } else {
    rows.push_back({tpScheduleName(sp.schedule), sp, {}});
  }
  const bool single = rows.size() == 1;
  opt.keepTimeline = single && !traceFile.empty();
  std::string csv =
      "config,tp,pp,dp,schedule,step_ms,tflops_per_gpu,percent_peak,exposed_ms,memory_gb,fits\n";
  for (Row& row : rows) {
    Workload w;
    if (makeTransformerStep(row.spec, &w) != tsrSuccess) {
      if (single) return failed("--workload gpt");
      std::printf("# %s: %s\n", row.label.c_str(), lastErrorMessage());
      row.rep.stepUs = -1;
      continue;
    }
    if (single && !writeTo.empty() && !writeFile(writeTo, workloadToJson(w))) {
      std::fprintf(stderr, "tessera_sim: --write %s: cannot write\n", writeTo.c_str());
      return kExitFailed;
    }
    if (simulateWorkload(w, opt, &row.rep) != tsrSuccess) {
      if (single) return failed("simulation");
      std::printf("# %s: %s\n", row.label.c_str(), lastErrorMessage());
      row.rep.stepUs = -1;
      continue;
    }
    if (single) {
      printReport(w, row.rep, opt);
      if (row.spec.inference && row.spec.decodeTokens > 0)
        std::printf("tokens per second    %12.0f generated (%d sequences x %d tokens)\n",
                    row.rep.stepUs > 0
                        ? 1e6 * row.spec.globalBatch * row.spec.decodeTokens / row.rep.stepUs
                        : 0.0,
                    row.spec.globalBatch, row.spec.decodeTokens);
      GpuModel g;
      if (gpuModelPreset(row.spec.gpu, &g) == tsrSuccess) {
        double gb = transformerMemoryBytes(row.spec) / 1e9;
        std::printf(
            "memory per GPU       %12.1f GB estimated of %.0f GB%s (Korthikanti et al.'s "
            "activations, 18 B per parameter)\n",
            gb, g.memCapacityGB, gb > g.memCapacityGB ? ": DOES NOT FIT" : "");
      }
      if (!traceFile.empty() && !writeFile(traceFile, chromeTrace(w, row.rep))) {
        std::fprintf(stderr, "tessera_sim: --trace %s: cannot write\n", traceFile.c_str());
        return kExitFailed;
      }
    }
  }
  if (!single) {
    std::printf("# %s: %d GPUs (%s on %s), global batch %d, micro-batch %d\n", sp.name.c_str(),
                sp.gpus(), sp.gpu.c_str(), sp.platform.c_str(), sp.globalBatch, sp.microBatch);
    GpuModel g;
    if (gpuModelPreset(sp.gpu, &g) != tsrSuccess) return failed("--gpu");
    std::printf("# %-20s %12s %10s %8s %12s %8s %9s\n", "config", "step (ms)", "TFLOP/s", "% peak",
                "exposed (ms)", "vs first", "mem (GB)");
    double base = 0;
    for (const Row& row : rows) {
      if (row.rep.stepUs < 0) continue;
      if (base == 0) base = row.rep.stepUs;
      const double gb = transformerMemoryBytes(row.spec) / 1e9;
      std::printf("  %-20s %12.2f %10.1f %8.1f %12.2f %7.2fx %8.1f%s\n", row.label.c_str(),
                  row.rep.stepUs / 1e3, row.rep.tflopsPerGpu, row.rep.percentOfPeak,
                  row.rep.exposedMeanUs / 1e3, base / row.rep.stepUs, gb,
                  gb > g.memCapacityGB ? " does not fit" : "");
      char line[256];
      std::snprintf(line, sizeof line, "%s,%d,%d,%d,%s,%.4f,%.3f,%.3f,%.4f,%.2f,%d\n",
                    row.label.c_str(), row.spec.tp, row.spec.pp, row.spec.dp,
                    tpScheduleName(row.spec.schedule), row.rep.stepUs / 1e3, row.rep.tflopsPerGpu,
                    row.rep.percentOfPeak, row.rep.exposedMeanUs / 1e3, gb,
                    gb > g.memCapacityGB ? 0 : 1);
      csv += line;
    }
  }
  if (!csvFile.empty() && !writeFile(csvFile, csv)) {
    std::fprintf(stderr, "tessera_sim: --csv %s: cannot write\n", csvFile.c_str());
    return kExitFailed;
  }
  return kExitOk;
}
