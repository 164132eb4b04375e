// The workload simulator (workload/): the reader refuses malformed and cyclic graphs with a
// sentence; the compute model's arithmetic against hand-computed values; small steps against
// hand-computed times (sequential, overlapped, NIC contention, deadlock); the transformer
// generator's dependency order (serial, Domino, fused, 1F1B); a folded step equals the same step
// with every GPU simulated; a fused op's wave and kernel overheads; the fused model's timeline
// against its closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <string>

#include "collectives/sim/platform.hpp"
#include "core/status.hpp"
#include "fused/sim/fused_model.hpp"
#include "workload/compute.hpp"
#include "workload/engine.hpp"
#include "workload/kernel_times.hpp"
#include "workload/transformer.hpp"
#include "workload/workload.hpp"

namespace tessera::workload {
namespace {

std::string refusal(const std::string& text) {
  Workload w;
  Result r = workloadFromJson(text, "test.json", &w);
  EXPECT_NE(r, tsrSuccess) << "accepted: " << text;
  return r == tsrSuccess ? "" : lastErrorMessage();
}

std::string wrap(const std::string& ops, const std::string& groups = "[]") {
  return R"({"format": "tessera-workload", "version": 1, "groups": )" + groups +
         R"(, "ranks": [{"gpu": 0, "ops": )" + ops + R"(}, {"gpu": 1, "ops": []}]})";
}

TEST(WorkloadReader, MalformedAndCyclicGraphsAreRefusedWithASentence) {
  EXPECT_NE(refusal("{not json").find("not JSON"), std::string::npos);
  EXPECT_NE(refusal(R"({"format": "tessera-plan", "version": 1, "ranks": []})").find("format"),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"op": "gemm", "m": 1, "n": 1, "k": 1, "flavour": 2}])"))
                .find("unknown field \"flavour\""),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"op": "gemm", "m": 1, "n": 1}])")).find("missing field \"k\""),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"op": "gemm", "m": -4, "n": 1, "k": 1}])")).find("\"m\""),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"op": "teleport"}])")).find("unknown op \"teleport\""),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"op": "allreduce", "group": "tp", "bytes": 8}])"))
                .find("no group is named \"tp\""),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"id": "a", "op": "memory", "bytes": 8, "after": ["z"]}])"))
                .find("\"after\" names \"z\""),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"id": "a", "op": "memory", "bytes": 8},
                             {"id": "a", "op": "memory", "bytes": 8}])"))
                .find("taken"),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"op": "send", "peer": 0, "bytes": 8}])")).find("not another rank"),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"op": "allreduce", "group": "g", "bytes": 8}])",
                         R"([{"name": "g", "ranks": [1]}])"))
                .find("not in group"),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([])", R"([{"name": "g", "ranks": [0, 0]}])")).find("twice"),
            std::string::npos);
  // Cycles: through `after` on two streams, and through a stream's order.
  EXPECT_NE(refusal(wrap(R"([{"id": "a", "op": "memory", "bytes": 8, "stream": "x", "after": ["b"]},
                             {"id": "b", "op": "memory", "bytes": 8, "stream": "y", "after": ["a"]}])"))
                .find("cycle"),
            std::string::npos);
  EXPECT_NE(refusal(wrap(R"([{"id": "a", "op": "memory", "bytes": 8, "after": ["b"]},
                             {"id": "b", "op": "memory", "bytes": 8}])"))
                .find("cycle"),
            std::string::npos);
  EXPECT_NE(
      refusal(wrap(R"([{"id": "a", "op": "memory", "bytes": 8, "after": ["a"]}])")).find("itself"),
      std::string::npos);
  // Fused operations stay inside a node.
  EXPECT_NE(refusal(wrap(R"([{"op": "gemm_rs", "group": "g", "m": 8, "n": 8, "k": 8}])",
                         R"([{"name": "g", "ranks": [0], "size": 16, "nodes": 2}])"))
                .find("inside one node"),
            std::string::npos);
  EXPECT_NE(refusal("{}").find("missing field"), std::string::npos);
}

TEST(WorkloadReader, GeneratedStepsRoundTripThroughJson) {
  TransformerSpec sp;
  sp.layers = 2;
  sp.hidden = 256;
  sp.heads = 4;
  sp.seq = 128;
  sp.vocab = 512;
  sp.tp = 2;
  sp.pp = 2;
  sp.dp = 2;
  sp.globalBatch = 8;
  sp.schedule = TpSchedule::kDomino;
  Workload w, back;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(workloadFromJson(workloadToJson(w), "round trip", &back), tsrSuccess)
      << lastErrorMessage();
  ASSERT_EQ(back.ranks.size(), w.ranks.size());
  for (size_t r = 0; r < w.ranks.size(); ++r) {
    ASSERT_EQ(back.ranks[r].ops.size(), w.ranks[r].ops.size());
    for (size_t i = 0; i < w.ranks[r].ops.size(); ++i) {
      EXPECT_EQ(back.ranks[r].ops[i].id, w.ranks[r].ops[i].id);
      EXPECT_EQ(back.ranks[r].ops[i].after, w.ranks[r].ops[i].after);
    }
  }
  EXPECT_EQ(workloadToJson(back), workloadToJson(w));
}

// ---- The compute model ----

GpuModel simpleGpu() {
  GpuModel g;
  g.name = "test";
  g.source = "test";
  g.sms = 4;
  g.bf16Tflops = 4.0;  // 4 TFLOP/s: 1e6 FLOP per microsecond per SM
  g.memGBs = 1000;     // 1e6 bytes per microsecond
  g.gemmEfficiency = 1;
  g.attentionEfficiency = 0.5;
  g.memEfficiency = 1;
  g.tileM = 128;
  g.tileN = 128;
  g.launchUs = 0;
  return g;
}

TEST(ComputeModel, GemmTimeIsWavesOfTilesOrItsBytesFromMemory) {
  GpuModel g = simpleGpu();
  // 256 x 256 x 1024: 4 tiles on 4 SMs, one wave of 2*128*128*1024 FLOPs at 1e6 FLOP/us.
  GemmShape s{256, 256, 1024, 1, DType::kBf16};
  EXPECT_EQ(gemmTiles(g, s), 4u);
  EXPECT_EQ(gemmWaves(g, s, 4), 1u);
  EXPECT_NEAR(gemmUs(g, s), 2.0 * 128 * 128 * 1024 / 1e6, 1e-9);
  // One more row of tiles (257 rows): 6 tiles, two waves, twice the time (wave quantization).
  GemmShape t{257, 256, 1024, 1, DType::kBf16};
  EXPECT_EQ(gemmTiles(g, t), 6u);
  EXPECT_NEAR(gemmUs(g, t), 2 * gemmUs(g, s), 1e-9);
  // A collective's CTA holding one SM: 4 tiles on 3 SMs take two waves.
  EXPECT_NEAR(gemmUs(g, s, Interference{1, 0}), 2 * gemmUs(g, s), 1e-9);
  // k = 1: memory-bound, (256*1 + 1*256 + 256*256) * 2 bytes at 1e6 B/us.
  GemmShape thin{256, 256, 1, 1, DType::kBf16};
  EXPECT_NEAR(gemmUs(g, thin), (256.0 + 256 + 65536) * 2 / 1e6, 1e-12);
  EXPECT_NEAR(gemmFlops(s), 2.0 * 256 * 256 * 1024, 1e-3);
  // A skinny GEMM (a decode step's 4 rows): tiles of 16 rows, 2 of them, K split in 2 to fill
  // the 4 SMs: one wave of 2*16*128*2048 FLOPs.
  GemmShape skinny{4, 256, 4096, 1, DType::kBf16};
  EXPECT_EQ(gemmTiles(g, skinny), 2u);
  EXPECT_EQ(gemmWaves(g, skinny, 4), 1u);
  EXPECT_NEAR(gemmUs(g, skinny), 2.0 * 16 * 128 * 2048 / 1e6, 1e-9);
  // Memory: bytes over the bandwidth left beside a collective's copies.
  EXPECT_NEAR(memoryUs(g, 2e6), 2.0, 1e-12);
  EXPECT_NEAR(memoryUs(g, 2e6, Interference{0, 500}), 4.0, 1e-12);
  // Attention: flops at the peak times its efficiency, or bytes, whichever is longer.
  EXPECT_NEAR(attentionUs(g, 4e6, 1.0, DType::kBf16), 4e6 / (4e6 * 0.5), 1e-12);
  EXPECT_NEAR(attentionUs(g, 1.0, 8e6, DType::kBf16), 8.0, 1e-12);
}

// The tile shape, the split of K and the fixed cost (calibrated on OpenXLA's measured H100 GEMMs,
// perf/sim_gemm_validate.py): a GEMM runs with whichever tile and split take least time.
TEST(ComputeModel, GemmTakesTheFasterTileAndSplitPlusItsFixedCost) {
  GpuModel g = simpleGpu();
  g.sms = 8;
  g.bf16Tflops = 8.0;  // still 1e6 FLOP per microsecond per SM
  g.tileN = 256;
  // 128 x 640 x 256 in 128 x 256 tiles: 3 tiles (the third half empty), one wave of
  // 2*128*256*256 FLOPs; in 128 x 128 tiles: 5 tiles, one wave of half that.
  GemmShape wide{128, 640, 256, 1, DType::kBf16};
  EXPECT_NEAR(gemmUs(g, wide), 2.0 * 128 * 256 * 256 / 1e6, 1e-9);
  g.moreTiles = {{128, 128}};
  EXPECT_EQ(gemmTiles(g, wide), 5u);
  EXPECT_NEAR(gemmUs(g, wide), 2.0 * 128 * 128 * 256 / 1e6, 1e-9);
  // A tie keeps the largest tile: 1024 x 512 x 256 is 16 tiles in two waves or 32 half-size
  // tiles in four, the same time.
  GemmShape square{1024, 512, 256, 1, DType::kBf16};
  EXPECT_EQ(gemmTiles(g, square), 16u);
  EXPECT_NEAR(gemmUs(g, square), 2 * 2.0 * 128 * 256 * 256 / 1e6, 1e-9);
  // Split-K writes and reads back its partial sums in fp32: 128 x 128 x 2048 is one tile, K split
  // 8 ways (256 each) fills the 8 SMs, its bytes (operands, result, 8 partial sums written and
  // read) at 1e6 B/us are below its compute, one wave of 2*128*128*256 FLOPs.
  GemmShape deep{128, 128, 2048, 1, DType::kBf16};
  const double operands = (128.0 * 2048 + 2048.0 * 128 + 128.0 * 128) * 2;
  const double partials = 128.0 * 128 * 4 * 2 * 8;
  EXPECT_GT(2.0 * 128 * 128 * 256 / 1e6, (operands + partials) / 1e6);
  EXPECT_NEAR(gemmUs(g, deep), 2.0 * 128 * 128 * 256 / 1e6, 1e-9);
  // At 1e5 B/us the split is memory-bound, its partial sums included, and still the faster.
  g.memGBs = 100;
  EXPECT_LT((operands + partials) / 1e5, 2.0 * 128 * 128 * 2048 / 1e6);
  EXPECT_NEAR(gemmUs(g, deep), (operands + partials) / 1e5, 1e-9);
  // Where memory is slower the partial sums cost more than the split saves: at 1e4 B/us the split
  // would take (operands + partials) / 1e4, unsplit one wave of the whole K or its operands.
  g.memGBs = 10;
  const double unsplit = std::max(2.0 * 128 * 128 * 2048 / 1e6, operands / 1e4);
  EXPECT_LT(unsplit, (operands + partials) / 1e4);
  EXPECT_NEAR(gemmUs(g, deep), unsplit, 1e-9);
  // The fixed cost and the launch gap are added once per GEMM.
  g.gemmFixedUs = 3;
  g.launchUs = 1;
  EXPECT_NEAR(gemmUs(g, deep), unsplit + 3 + 1, 1e-9);
  EXPECT_EQ(gemmUs(g, GemmShape{0, 128, 128, 1, DType::kBf16}), 0.0);
}

// Each wave costs its tiles' main loop and a fixed time more (a short K does not hide a tile's
// first loads and its epilogue); the main-loop rate is derived from a measured GEMM.
TEST(ComputeModel, EachWaveAddsItsOverheadAndAMeasuredGemmGivesTheRate) {
  GpuModel g = simpleGpu();  // 4 SMs of 1e6 FLOP/us, 128 x 128 tiles
  g.gemmWaveUs = 2;
  g.gemmFixedUs = 1;
  const double tileUs = 2.0 * 128 * 128 * 1024 / 1e6;
  // 257 x 256 x 1024: 6 tiles, two waves, each its tiles' main loop and 2 us, then 1 us once.
  GemmShape t{257, 256, 1024, 1, DType::kBf16};
  EXPECT_NEAR(gemmUs(g, t), 2 * (tileUs + 2) + 1, 1e-9);
  // 512 x 512 x 1024 measured at half the peak: 16 tiles in 4 waves take 2 * 512 * 512 * 1024
  // FLOPs / 2e6 FLOP/us; the main loop runs at 4 * tileUs / (that - 1 - 4 * 2) of the peak.
  GemmShape measured{512, 512, 1024, 1, DType::kBf16};
  const double target = gemmFlops(measured) / (4e6 * 0.5);
  ASSERT_EQ(gemmCalibrate(&g, measured, 0.5), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(g.gemmEfficiency, 4 * tileUs / (target - 1 - 4 * 2), 1e-9);
  EXPECT_NEAR(gemmUs(g, measured), target, 1e-6);
  // Refused: not a share of the peak; faster than the overheads allow at the full peak (here
  // 4 * (tileUs + 2) + 1 us against a measured 4 * tileUs); no shape.
  const double before = g.gemmEfficiency;
  EXPECT_NE(gemmCalibrate(&g, measured, 1.5), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("not a share of the peak"), std::string::npos);
  EXPECT_NE(gemmCalibrate(&g, measured, 1.0), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("overheads"), std::string::npos)
      << lastErrorMessage();
  EXPECT_NE(gemmCalibrate(&g, GemmShape{0, 512, 1024, 1, DType::kBf16}, 0.5), tsrSuccess);
  EXPECT_EQ(g.gemmEfficiency, before);  // a refusal changes nothing
}

TEST(ComputeModel, PresetsNameTheirSources) {
  for (const std::string& name : gpuModelNames()) {
    GpuModel g;
    ASSERT_EQ(gpuModelPreset(name, &g), tsrSuccess);
    EXPECT_GT(g.sms, 0);
    EXPECT_GT(g.bf16Tflops, 0);
    EXPECT_GT(g.gemmEfficiency, 0.5);
    EXPECT_LE(g.gemmEfficiency, 1.0);
    EXPECT_NE(g.source.find(" per wave"), std::string::npos) << name;
    EXPECT_NE(g.source.find("datasheet"), std::string::npos) << name;
    EXPECT_NE(g.source.find("assumed"), std::string::npos) << name;
  }
  // Memory kernels at the copy bandwidth measured on each generation: BabelStream's Copy on an
  // A100-SXM4-80GB (1709.4 GB/s: 1709.4 bytes a nanosecond take 1 us plus the launch), about
  // 3.0 TB/s of the H100's 3.35 and 4.3 of the H200's 4.8 (a device-to-device copy).
  GpuModel a100, h100, h200;
  ASSERT_EQ(gpuModelPreset("a100", &a100), tsrSuccess);
  ASSERT_EQ(gpuModelPreset("h100", &h100), tsrSuccess);
  ASSERT_EQ(gpuModelPreset("h200", &h200), tsrSuccess);
  EXPECT_NEAR(memoryUs(a100, 1709.4e6), 1000 + a100.launchUs, 1e-6);
  EXPECT_NE(a100.source.find("BabelStream"), std::string::npos);
  EXPECT_NEAR(h100.memGBs * h100.memEfficiency, 3000, 0.02 * 3000);
  EXPECT_NEAR(h200.memGBs * h200.memEfficiency, 4300, 0.02 * 4300);
  // GEMMs' main loops at the MAMF finder's best (a ceiling over its search of shapes): 267.9 of
  // the A100's 312 TFLOP/s, 792.1 of the H100's 989.4; a GEMM with its overheads runs below it.
  EXPECT_NEAR(a100.gemmEfficiency, 267.9 / 312, 1e-12);
  EXPECT_NEAR(h100.gemmEfficiency, 792.1 / 989.4, 1e-12);
  EXPECT_NEAR(h200.gemmEfficiency, h100.gemmEfficiency, 1e-12);
  const GemmShape mamf{6144, 17920, 2816, 1, DType::kBf16};
  EXPECT_GT(gemmUs(h100, mamf) - h100.launchUs, gemmFlops(mamf) / (989.4e6 * 792.1 / 989.4));
  GpuModel g;
  EXPECT_NE(gpuModelPreset("tpu", &g), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("a100, a800, h100, h800, h200"),
            std::string::npos);
}

// ---- Small steps against hand-computed times ----

sim::Machine twoNodes() {
  sim::Machine m;
  m.name = "test";
  m.source = "test";
  m.kind = sim::MachineKind::kGpu;
  m.nodes = 2;
  m.ranksPerNode = 2;
  m.memGBs = 1000;
  m.intraGBs = 100;
  m.intraLatencyUs = 1;
  m.intraEfficiency = 1;
  m.nicsPerNode = 1;  // both GPUs of a node share one NIC
  m.nicGBs = 10;      // 1e4 bytes per microsecond
  m.nicLatencyUs = 1;
  m.fabricLatencyUs = 0;
  return m;
}

Workload parse(const std::string& text) {
  Workload w;
  EXPECT_EQ(workloadFromJson(text, "test", &w), tsrSuccess) << lastErrorMessage();
  return w;
}

StepReport runOn(const Workload& w, EngineOptions opt = {}) {
  StepReport rep;
  EXPECT_EQ(simulateWorkloadOn(w, simpleGpu(), twoNodes(), opt, &rep), tsrSuccess)
      << lastErrorMessage();
  return rep;
}

TEST(WorkloadStep, SequentialOpsAddUpAndOverlappedOnesDoNot) {
  // Rank 0: 1000 us of memory work, then sends 1e6 bytes to rank 2 (another node: 2 us of
  // latency + 100 us), which then does 500 us of work. A 50 us collective (fixed) ends it.
  EngineOptions opt;
  opt.fixedCollectiveUs = 50;
  Workload w = parse(R"({"format": "tessera-workload", "version": 1, "nodes": 2,
    "groups": [{"name": "all", "ranks": [0, 1], "size": 2, "nodes": 2}],
    "ranks": [
      {"gpu": 0, "ops": [{"id": "work", "op": "memory", "bytes": 1e9},
                         {"id": "send", "op": "send", "peer": 1, "bytes": 1e6, "after": ["work"]},
                         {"id": "ar", "op": "allreduce", "group": "all", "bytes": 8, "after": ["send"]}]},
      {"gpu": 2, "ops": [{"id": "recv", "op": "recv", "peer": 0, "bytes": 1e6},
                         {"id": "work", "op": "memory", "bytes": 5e8, "after": ["recv"]},
                         {"id": "ar", "op": "allreduce", "group": "all", "bytes": 8, "after": ["work"]}]}]})");
  StepReport r = runOn(w, opt);
  EXPECT_NEAR(r.stepUs, 1000 + 102 + 500 + 50, 1e-6);
  // Rank 0 computes 1000 us, communicates through the send, idles while rank 2 works (a wait for
  // a peer that is not yet communicating is a bubble, not communication), then the all-reduce.
  EXPECT_NEAR(r.ranks[0].computeUs, 1000, 1e-6);
  EXPECT_NEAR(r.ranks[0].exposedUs, 102 + 50, 1e-6);
  EXPECT_NEAR(r.ranks[1].exposedUs, 102 + 50, 1e-6);
  ASSERT_EQ(r.timeline.size(), 2u);
  EXPECT_NEAR(r.timeline[1][1].start, 1102, 1e-6);

  // The same send on its own stream beside 1000 us of work: hidden.
  Workload o = parse(R"({"format": "tessera-workload", "version": 1, "nodes": 2,
    "ranks": [
      {"gpu": 0, "ops": [{"id": "send", "op": "send", "peer": 1, "bytes": 1e6, "stream": "pp"},
                         {"id": "work", "op": "memory", "bytes": 1e9}]},
      {"gpu": 2, "ops": [{"id": "recv", "op": "recv", "peer": 0, "bytes": 1e6}]}]})");
  StepReport q = runOn(o);
  EXPECT_NEAR(q.stepUs, 1000, 1e-6);
  EXPECT_NEAR(q.ranks[0].exposedUs, 0, 1e-6);
}

TEST(WorkloadStep, GemmAndAttentionEfficienciesGivenOverrideThePresets) {
  // One compute-bound GEMM on the A100 preset: 19 waves of its tiles' main loop and a wave's
  // overhead, then the kernel's fixed cost and the launch.
  Workload w = parse(R"({"format": "tessera-workload", "version": 1, "gpu": "a100",
    "platform": "dgx-a100", "ranks": [{"gpu": 0, "ops": [
      {"id": "g", "op": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "fp16"}]}]})");
  GpuModel a100;
  ASSERT_EQ(gpuModelPreset("a100", &a100), tsrSuccess);
  StepReport preset;
  ASSERT_EQ(simulateWorkload(w, {}, &preset), tsrSuccess) << lastErrorMessage();
  const double fixed = a100.gemmFixedUs + a100.launchUs;
  // 8192 x 8192 in 128 x 256 tiles: 2048 tiles, 19 waves on 108 SMs; each tile 2 * 128 * 256 *
  // 8192 FLOPs at the SM's share of the peak.
  const double tileUs = 2.0 * 128 * 256 * 8192 / (312e6 * a100.gemmEfficiency / 108);
  EXPECT_NEAR(preset.stepUs, 19 * (tileUs + a100.gemmWaveUs) + fixed, 1e-6 * preset.stepUs);
  // A GEMM measured by another generation of libraries (CUTLASS 2.2's profiler, 2020: 3456 x
  // 4096 x 8192 at 235.1 TFLOP/s): that GEMM then takes its measured time, and the 8192^3 one
  // its 19 waves at the rate derived.
  Workload cut = parse(R"({"format": "tessera-workload", "version": 1, "gpu": "a100",
    "platform": "dgx-a100", "ranks": [{"gpu": 0, "ops": [
      {"id": "g", "op": "gemm", "m": 3456, "n": 4096, "k": 8192, "dtype": "fp16"}]}]})");
  EngineOptions opt;
  opt.gemmEfficiency = 0.7536;
  opt.gemmEfficiencyM = 3456;
  opt.gemmEfficiencyN = 4096;
  opt.gemmEfficiencyK = 8192;
  StepReport measured, slower;
  ASSERT_EQ(simulateWorkload(cut, opt, &measured), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(measured.stepUs, 2.0 * 3456 * 4096 * 8192 / (312e6 * 0.7536) + a100.launchUs,
              1e-6 * measured.stepUs);
  ASSERT_EQ(simulateWorkload(w, opt, &slower), tsrSuccess) << lastErrorMessage();
  // By hand: that GEMM's 27 x 16 = 432 tiles are 4 waves on 108 SMs, so its measured time less
  // the fixed cost and 4 waves' overheads is 4 tiles' main loops at the rate derived.
  const double measuredUs = 2.0 * 3456 * 4096 * 8192 / (312e6 * 0.7536);
  const double derived = 4 * 2.0 * 128 * 256 * 8192 / (312e6 / 108) /
                         (measuredUs - a100.gemmFixedUs - 4 * a100.gemmWaveUs);
  EXPECT_LT(derived, a100.gemmEfficiency);
  GpuModel old = a100;
  ASSERT_EQ(gemmCalibrate(&old, GemmShape{3456, 4096, 8192, 1, DType::kFp16}, 0.7536), tsrSuccess);
  EXPECT_NEAR(old.gemmEfficiency, derived, 1e-9);
  EXPECT_NEAR(slower.stepUs,
              19 * (2.0 * 128 * 256 * 8192 / (312e6 * derived / 108) + a100.gemmWaveUs) + fixed,
              1e-6 * slower.stepUs);
  // With no overheads (--gemm-overheads 0,0) that GEMM's 432 tiles fill 4 waves exactly: the
  // main loop runs at the measured efficiency itself.
  opt.gemmFixedUs = 0;
  opt.gemmWaveUs = 0;
  StepReport bare;
  ASSERT_EQ(simulateWorkload(w, opt, &bare), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(bare.stepUs, 19 * 2.0 * 128 * 256 * 8192 / (312e6 * 0.7536 / 108) + a100.launchUs,
              1e-6 * bare.stepUs);
  // Without a shape the efficiency given is the main-loop rate itself, as the preset's.
  opt = EngineOptions{};
  opt.gemmEfficiency = 0.5;
  StepReport half;
  ASSERT_EQ(simulateWorkload(w, opt, &half), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(half.stepUs,
              19 * (2.0 * 128 * 256 * 8192 / (312e6 * 0.5 / 108) + a100.gemmWaveUs) + fixed,
              1e-6 * half.stepUs);
  opt.gemmEfficiency = 1.25;
  StepReport refused;
  EXPECT_NE(simulateWorkload(w, opt, &refused), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("not a share of the peak"), std::string::npos)
      << lastErrorMessage();
  opt.gemmEfficiency = -0.5;
  EXPECT_NE(simulateWorkload(w, opt, &refused), tsrSuccess);
  // The attention kernels' efficiency likewise: 1e12 FLOPs at 40% of 312 TFLOP/s.
  Workload a = parse(R"({"format": "tessera-workload", "version": 1, "gpu": "a100",
    "platform": "dgx-a100", "ranks": [{"gpu": 0, "ops": [
      {"id": "fa", "op": "attention", "flops": 1e12, "bytes": 1e6, "dtype": "bf16"}]}]})");
  EngineOptions fa1;
  fa1.attentionEfficiency = 0.4;
  StepReport at;
  ASSERT_EQ(simulateWorkload(a, fa1, &at), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(at.stepUs, 1e12 / (312e6 * 0.4) + a100.launchUs, 1e-6 * at.stepUs);
  fa1.attentionEfficiency = 2;
  EXPECT_NE(simulateWorkload(a, fa1, &at), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("an attention efficiency of 2 is not"),
            std::string::npos)
      << lastErrorMessage();
}

TEST(WorkloadStep, AFusedKernelPaysEachWavesOverheadAndItsFixedCostOnce) {
  // GEMM+ReduceScatter on the 2 GPUs of a node: 1024 x 256 in 128 x 128 tiles is 16 tiles, 4 waves
  // on the test GPU's 4 SMs; each tile's main loop is 2 * 128 * 128 * 64 FLOPs at 1e6 a
  // microsecond (2.1 us), and its 32 KiB put 0.33 us + 2 us on the 100 GB/s link, so the puts
  // stay behind the tiles. A wave's overhead then adds to each of the 4 waves, and the kernel's
  // fixed cost once, however many waves.
  Workload w = parse(R"({"format": "tessera-workload", "version": 1, "nodes": 1,
    "groups": [{"name": "tp", "ranks": [0, 1], "size": 2, "nodes": 1}],
    "ranks": [
      {"gpu": 0, "ops": [{"id": "f", "op": "gemm_rs", "group": "tp", "m": 1024, "n": 256, "k": 64}]},
      {"gpu": 1, "ops": [{"id": "f", "op": "gemm_rs", "group": "tp", "m": 1024, "n": 256, "k": 64}]}]})");
  auto step = [&](double fixedUs, double waveUs) {
    GpuModel g = simpleGpu();
    g.gemmFixedUs = fixedUs;
    g.gemmWaveUs = waveUs;
    StepReport rep;
    EXPECT_EQ(simulateWorkloadOn(w, g, twoNodes(), {}, &rep), tsrSuccess) << lastErrorMessage();
    return rep.stepUs;
  };
  const double bare = step(0, 0);
  EXPECT_GT(bare, 4 * 2.0 * 128 * 128 * 64 / 1e6);  // the waves, then the last reduction
  EXPECT_NEAR(step(0, 3) - bare, 4 * 3, 1e-9);
  EXPECT_NEAR(step(5, 0) - bare, 5, 1e-9);
  EXPECT_NEAR(step(5, 3) - bare, 5 + 4 * 3, 1e-9);
}

TEST(WorkloadStep, MeasuredKernelTimesReplaceTheModelsForTheirShapes) {
  // measured.json as perf/gpu_model_check.py writes it: the 256 x 256 x 1024 GEMM measured twice
  // (10 and 20 us: their mean), the 1e9-byte memory op at 400 us, a shape the step does not have.
  KernelTimes kt;
  ASSERT_EQ(kernelTimesFromJson(R"({"device": "NVIDIA H200", "reps": 5, "ops": [
      {"config": "a", "key": ["gemm", 256, 256, 1024, 1], "id": "x", "count": 2, "us": [10, 9, 11]},
      {"config": "b", "key": ["gemm", 256, 256, 1024, 1], "id": "y", "count": 1, "us": [20, 19, 21]},
      {"config": "a", "key": ["memory", 1000000000], "us": [400, 390, 410]},
      {"config": "a", "key": ["gemm", 64, 64, 64, 3], "us": [1, 1, 1]}]})",
                                "measured.json", &kt),
            tsrSuccess)
      << lastErrorMessage();
  EXPECT_EQ(kt.device, "NVIDIA H200");
  EXPECT_EQ(kt.size(), 3u);
  GpuModel g = simpleGpu();
  g.launchUs = 2;
  const GemmShape measured{256, 256, 1024, 1, DType::kBf16};
  const GemmShape other{512, 256, 1024, 1, DType::kBf16};
  // Rank 0: the measured GEMM, the measured memory op, a GEMM of another shape, and the measured
  // shape again in fp32 (measured in bf16: not used for it). Rank 1: nothing.
  Workload w = parse(R"({"format": "tessera-workload", "version": 1, "nodes": 1,
    "ranks": [{"gpu": 0, "ops": [{"op": "gemm", "m": 256, "n": 256, "k": 1024},
                                 {"op": "memory", "bytes": 1e9},
                                 {"op": "gemm", "m": 512, "n": 256, "k": 1024},
                                 {"op": "gemm", "m": 256, "n": 256, "k": 1024, "dtype": "fp32"}]}]})");
  g.fp32Tflops = 4.0;
  const GemmShape measuredFp32{256, 256, 1024, 1, DType::kFp32};
  EngineOptions opt;
  StepReport model;
  ASSERT_EQ(simulateWorkloadOn(w, g, twoNodes(), opt, &model), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(model.stepUs,
              gemmUs(g, measured) + memoryUs(g, 1e9) + gemmUs(g, other) + gemmUs(g, measuredFp32),
              1e-6);
  EXPECT_EQ(model.measuredOps, 0u);
  opt.kernelTimes = std::make_shared<KernelTimes>(kt);
  StepReport r;
  ASSERT_EQ(simulateWorkloadOn(w, g, twoNodes(), opt, &r), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(r.stepUs, (15 + 2) + (400 + 2) + gemmUs(g, other) + gemmUs(g, measuredFp32), 1e-6);
  EXPECT_EQ(r.computeOps, 4u);
  EXPECT_EQ(r.measuredOps, 2u);

  // Beside a collective a measured kernel slows by the model's ratio: the 50 us all-reduce's CTAs
  // leave 1 of the 4 SMs, so the GEMM's 4 tiles take 4 waves and it runs at the model's time
  // alone over its time on 1 SM; after the all-reduce it runs at full rate again.
  opt.fixedCollectiveUs = 50;
  Workload c = parse(R"({"format": "tessera-workload", "version": 1, "nodes": 1,
    "groups": [{"name": "all", "ranks": [0], "size": 2, "nodes": 1}],
    "ranks": [{"gpu": 0, "ops": [{"op": "allreduce", "group": "all", "bytes": 8, "stream": "tp"},
                                 {"op": "gemm", "m": 256, "n": 256, "k": 1024}]}]})");
  StepReport b;
  ASSERT_EQ(simulateWorkloadOn(c, g, twoNodes(), opt, &b), tsrSuccess) << lastErrorMessage();
  const double rate = gemmUs(g, measured) / gemmUs(g, measured, Interference{opt.commSms, 0});
  ASSERT_LT(rate, 0.5);
  ASSERT_GT(17.0 / rate, 50.0);  // the GEMM outlasts the all-reduce
  EXPECT_NEAR(b.stepUs, 50 + (17 - 50 * rate), 1e-6);
  EXPECT_EQ(b.measuredOps, 1u);

  // Refusals, each with a sentence.
  auto refused = [](const std::string& text) {
    KernelTimes k;
    EXPECT_NE(kernelTimesFromJson(text, "m.json", &k), tsrSuccess) << text;
    return std::string(lastErrorMessage());
  };
  EXPECT_NE(refused("{nope").find("not JSON"), std::string::npos);
  EXPECT_NE(refused(R"({"device": "x"})").find("no \"ops\" array"), std::string::npos);
  EXPECT_NE(refused(R"({"ops": [{"us": [1, 1, 1]}]})").find("ops[0] has no key"),
            std::string::npos);
  EXPECT_NE(refused(R"({"ops": [{"key": ["gemm", 1, 1, 1, 1]}]})").find("no \"us\""),
            std::string::npos);
  EXPECT_NE(refused(R"({"ops": [{"key": ["gemm", 1, 1, 1, 1], "us": [-3, 1, 1]}]})")
                .find("not a positive time"),
            std::string::npos);
  EXPECT_NE(refused(R"({"ops": [{"key": ["gemm", 1, 0, 1, 1], "us": [3, 1, 1]}]})")
                .find("positive integers"),
            std::string::npos);
  EXPECT_NE(refused(R"({"ops": [{"key": ["gemm", 1, 1, 1], "us": [3, 1, 1]}]})")
                .find("positive integers"),
            std::string::npos);
  EXPECT_NE(
      refused(R"({"ops": [{"key": ["memory", -8], "us": [3, 1, 1]}]})").find("[\"memory\", bytes]"),
      std::string::npos);
  EXPECT_NE(refused(R"({"ops": [{"key": ["attention", 8], "us": [3, 1, 1]}]})")
                .find("unknown kind \"attention\""),
            std::string::npos);
  KernelTimes none;
  EXPECT_NE(readKernelTimesFile("/nonexistent/measured.json", &none), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("cannot open"), std::string::npos);
}

TEST(WorkloadStep, TrafficSharingANicTakesLongerAndTheSwitchTurnsItOff) {
  // Ranks 0 and 1 share node 0's one NIC: two sends of 1e6 bytes to node 1 at once progress at
  // half the rate each: 2 us + 200 us, where alone each takes 2 + 100.
  Workload w = parse(R"({"format": "tessera-workload", "version": 1, "nodes": 2,
    "ranks": [
      {"gpu": 0, "ops": [{"op": "send", "peer": 2, "bytes": 1e6}]},
      {"gpu": 1, "ops": [{"op": "send", "peer": 3, "bytes": 1e6}]},
      {"gpu": 2, "ops": [{"op": "recv", "peer": 0, "bytes": 1e6}]},
      {"gpu": 3, "ops": [{"op": "recv", "peer": 1, "bytes": 1e6}]}]})");
  StepReport shared = runOn(w);
  EXPECT_NEAR(shared.stepUs, 2 * 102, 1e-6);
  EngineOptions off;
  off.nicContention = false;
  EXPECT_NEAR(runOn(w, off).stepUs, 102, 1e-6);
}

TEST(WorkloadStep, ADeadlockIsASentenceNamingTheWaits) {
  Workload w = parse(R"({"format": "tessera-workload", "version": 1, "nodes": 2,
    "ranks": [
      {"gpu": 0, "ops": [{"id": "r", "op": "recv", "peer": 1, "bytes": 8},
                         {"id": "s", "op": "send", "peer": 1, "bytes": 8}]},
      {"gpu": 2, "ops": [{"id": "r", "op": "recv", "peer": 0, "bytes": 8},
                         {"id": "s", "op": "send", "peer": 0, "bytes": 8}]}]})");
  StepReport rep;
  ASSERT_NE(simulateWorkloadOn(w, simpleGpu(), twoNodes(), {}, &rep), tsrSuccess);
  std::string why = lastErrorMessage();
  EXPECT_NE(why.find("deadlocks"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 0 op \"r\" waits for rank 1's matching send"), std::string::npos) << why;
}

// ---- The transformer generator ----

TransformerSpec smallGpt() {
  TransformerSpec sp;
  sp.layers = 2;
  sp.hidden = 512;
  sp.heads = 8;
  sp.seq = 256;
  sp.vocab = 1024;
  sp.microBatch = 2;
  sp.globalBatch = 8;
  sp.tp = 2;
  sp.gpu = "h100";
  sp.platform = "dgx-h100";
  return sp;
}

size_t indexOf(const Rank& r, const std::string& id) {
  for (size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].id == id) return i;
  ADD_FAILURE() << "no op " << id;
  return 0;
}

TEST(TransformerSchedules, SerialDominoAndFusedOrderTheirOps) {
  EngineOptions opt;
  opt.fixedCollectiveUs = 30;  // closed-form collectives: no SimGrid
  TransformerSpec sp = smallGpt();
  // Serial: the all-reduce is on the compute stream between proj and drop1.
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  const Rank& r = w.ranks[0];
  size_t proj = indexOf(r, "mb0.l0.proj"), ar = indexOf(r, "mb0.l0.ar1");
  size_t drop = indexOf(r, "mb0.l0.drop1");
  EXPECT_EQ(ar, proj + 1);
  EXPECT_EQ(drop, ar + 1);
  EXPECT_EQ(r.ops[ar].stream, r.ops[proj].stream);
  StepReport serial;
  ASSERT_EQ(simulateWorkload(w, opt, &serial), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(serial.timeline[0][drop].start, serial.timeline[0][ar].end, 1e-9);
  EXPECT_GT(serial.exposedUs, 0);

  // Domino: chunk 0's all-reduce runs on the tp stream beside chunk 1's attention; chunk 0's MLP
  // waits for it, chunk 1's does not.
  sp.schedule = TpSchedule::kDomino;
  Workload d;
  ASSERT_EQ(makeTransformerStep(sp, &d), tsrSuccess) << lastErrorMessage();
  const Rank& rd = d.ranks[0];
  size_t ar0 = indexOf(rd, "mb0.l0c0.ar1"), qkv1 = indexOf(rd, "mb0.l0c1.qkv");
  size_t mlp0 = indexOf(rd, "mb0.l0c0.drop1"), ar1 = indexOf(rd, "mb0.l0c1.ar1");
  EXPECT_NE(rd.ops[ar0].stream, rd.ops[qkv1].stream);
  EXPECT_NE(std::find(rd.ops[mlp0].after.begin(), rd.ops[mlp0].after.end(), ar0),
            rd.ops[mlp0].after.end());
  EXPECT_LT(ar0, qkv1);
  EXPECT_LT(qkv1, mlp0);
  EXPECT_LT(ar1, mlp0);
  StepReport domino;
  ASSERT_EQ(simulateWorkload(d, opt, &domino), tsrSuccess) << lastErrorMessage();
  EXPECT_LT(domino.timeline[0][ar0].start, domino.timeline[0][qkv1].end);
  EXPECT_GT(domino.timeline[0][ar0].end, domino.timeline[0][qkv1].start);

  // Fused: no collective ops; GEMM+AllReduce in their place (sequence parallelism: AllGather+GEMM
  // and GEMM+ReduceScatter).
  sp.schedule = TpSchedule::kFused;
  Workload f;
  ASSERT_EQ(makeTransformerStep(sp, &f), tsrSuccess) << lastErrorMessage();
  // The layers' collectives are all fused; the embedding's all-reduce and the loss's small ones
  // stay collectives, the logits' input gradient is a fused GEMM+AllReduce too.
  for (const Op& op : f.ranks[0].ops) {
    const size_t l = op.id.find(".l");
    if (l != std::string::npos && l + 2 < op.id.size() && std::isdigit(op.id[l + 2])) {
      EXPECT_NE(op.kind, OpKind::kCollective) << op.id;
    }
  }
  EXPECT_EQ(f.ranks[0].ops[indexOf(f.ranks[0], "mb0.logits_dgrad_ar")].fused,
            FusedKind::kGemmAllReduce);
  EXPECT_EQ(f.ranks[0].ops[indexOf(f.ranks[0], "mb0.embed_ar")].collective, Collective::kAllReduce);
  EXPECT_EQ(f.ranks[0].ops[indexOf(f.ranks[0], "mb0.l0.proj_ar")].fused, FusedKind::kGemmAllReduce);
  sp.sequenceParallel = true;
  ASSERT_EQ(makeTransformerStep(sp, &f), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(f.ranks[0].ops[indexOf(f.ranks[0], "mb0.l0.ag_qkv")].fused, FusedKind::kAllGatherGemm);
  EXPECT_EQ(f.ranks[0].ops[indexOf(f.ranks[0], "mb0.l0.proj_rs")].fused,
            FusedKind::kGemmReduceScatter);
}

TEST(TransformerSchedules, EachLayerEndsWithItsBiasDropoutAddAndBeginsItsBackwardWithTheNorm) {
  // Megatron-LM's layer: LN, attention, bias-dropout-add, LN, MLP, bias-dropout-add. The second
  // bias-dropout-add follows the MLP's all-reduce; in the backward the input layernorm's backward
  // follows the QKV's input-gradient all-reduce, and the layer below starts after it.
  EngineOptions opt;
  opt.fixedCollectiveUs = 30;
  TransformerSpec sp = smallGpt();  // TP 2, 2 layers, micro-batch 2 of sequence 256, hidden 512
  sp.recompute = true;
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  const Rank& r = w.ranks[0];
  const double act = 2.0 * 256 * 512 * 2;  // tokens x hidden x 2 bytes
  for (const char* mb : {"mb0.", "mb3."}) {
    const std::string m = mb;
    // Forward: each layer's drop2 right after its ar2, before the next layer's ln1 (the last
    // layer's before the final layernorm); its bytes: input, residual, output, the 1-byte mask.
    EXPECT_EQ(indexOf(r, m + "l0.drop2"), indexOf(r, m + "l0.ar2") + 1);
    EXPECT_EQ(indexOf(r, m + "l1.ln1"), indexOf(r, m + "l0.drop2") + 1);
    EXPECT_EQ(indexOf(r, m + "ln_f"), indexOf(r, m + "l1.drop2") + 1);
    EXPECT_DOUBLE_EQ(r.ops[indexOf(r, m + "l0.drop2")].bytes, 3.5 * act);
    EXPECT_DOUBLE_EQ(r.ops[indexOf(r, m + "l0.drop1")].bytes, 3.5 * act);
    // Recomputation reruns the whole layer, its drop2 too, before the layer's backward.
    EXPECT_LT(indexOf(r, m + "l1.re.drop2"), indexOf(r, m + "l1.b.drop2_bwd"));
    EXPECT_GT(indexOf(r, m + "l1.re.drop2"), indexOf(r, m + "l1.re.ar2"));
    // Backward: ln1_bwd after the layer's ar_g1 and its weight gradient, before the layer below.
    const size_t ln1 = indexOf(r, m + "l1.b.ln1_bwd");
    EXPECT_GT(ln1, indexOf(r, m + "l1.b.ar_g1"));
    EXPECT_LT(ln1, indexOf(r, m + "l0.re.ln1"));
    EXPECT_DOUBLE_EQ(r.ops[ln1].bytes, 5 * act);  // gamma and beta's pass, then the input's
    EXPECT_LT(indexOf(r, m + "l0.b.ln1_bwd"), indexOf(r, m + "embed_bwd"));
  }
  // The QKV projection's bias is a kernel of its own; every bias's gradient a reduction of its
  // output's gradient after the backward that makes it.
  EXPECT_EQ(indexOf(r, "mb0.l0.qkv_bias"), indexOf(r, "mb0.l0.qkv") + 1);
  EXPECT_DOUBLE_EQ(r.ops[indexOf(r, "mb0.l0.qkv_bias")].bytes, 2 * 3 * act / 2);
  EXPECT_EQ(indexOf(r, "mb0.l0.b.fc2_bias_bwd"), indexOf(r, "mb0.l0.b.drop2_bwd") + 1);
  EXPECT_EQ(indexOf(r, "mb0.l0.b.fc1_bias_bwd"), indexOf(r, "mb0.l0.b.gelu_bwd") + 1);
  EXPECT_EQ(indexOf(r, "mb0.l0.b.proj_bias_bwd"), indexOf(r, "mb0.l0.b.drop1_bwd") + 1);
  EXPECT_EQ(indexOf(r, "mb0.l0.b.qkv_bias_bwd"), indexOf(r, "mb0.l0.b.qkv_wgrad") + 1);
  EXPECT_DOUBLE_EQ(r.ops[indexOf(r, "mb0.l0.b.fc1_bias_bwd")].bytes, 4 * act / 2);  // F / T = 2 H
  EXPECT_DOUBLE_EQ(r.ops[indexOf(r, "mb0.l0.b.proj_bias_bwd")].bytes, act);
  // The context's permute to [s, b, heads, d] is a copy; the gradients of Q, K and V (views of
  // the QKV output) are concatenated.
  EXPECT_EQ(indexOf(r, "mb0.l0.ctx_copy"), indexOf(r, "mb0.l0.pv") + 1);
  EXPECT_DOUBLE_EQ(r.ops[indexOf(r, "mb0.l0.ctx_copy")].bytes, act);
  EXPECT_EQ(indexOf(r, "mb0.l0.b.qkv_cat_bwd"), indexOf(r, "mb0.l0.b.dqk_dk") + 1);
  EXPECT_DOUBLE_EQ(r.ops[indexOf(r, "mb0.l0.b.qkv_cat_bwd")].bytes, 3 * act);
  StepReport serial;
  ASSERT_EQ(simulateWorkload(w, opt, &serial), tsrSuccess) << lastErrorMessage();
  const auto& t = serial.timeline[0];
  EXPECT_GE(t[indexOf(r, "mb0.l0.drop2")].start, t[indexOf(r, "mb0.l0.ar2")].end);

  // Sequence parallelism keeps a column-parallel layer's input split: it is all-gathered again
  // for the weight gradient, before the input-gradient GEMM (serial), or on the tp stream beside
  // it (Megatron-LM's asynchronous backward), the weight gradient waiting for it.
  sp.sequenceParallel = true;
  for (bool async : {false, true}) {
    sp.tpAsyncBackward = async;
    Workload q;
    ASSERT_EQ(makeTransformerStep(sp, &q), tsrSuccess) << lastErrorMessage();
    const Rank& rq = q.ranks[0];
    StepReport sq;
    ASSERT_EQ(simulateWorkload(q, opt, &sq), tsrSuccess) << lastErrorMessage();
    for (const char* l : {"x1", "x2"}) {
      const std::string base = std::string("mb0.l0.b.");
      const std::string dgrad = base + (l[1] == '1' ? "qkv_dgrad" : "fc1_dgrad");
      const std::string wgrad = base + (l[1] == '1' ? "qkv_wgrad" : "fc1_wgrad");
      const size_t ag = indexOf(rq, base + "ag_" + l), dg = indexOf(rq, dgrad);
      const size_t wg = indexOf(rq, wgrad);
      EXPECT_EQ(rq.ops[ag].collective, Collective::kAllGather);
      EXPECT_DOUBLE_EQ(rq.ops[ag].bytes, act);
      EXPECT_LT(ag, dg);
      EXPECT_GE(sq.timeline[0][wg].start, sq.timeline[0][ag].end) << l << async;
      if (async) {
        EXPECT_NE(rq.ops[ag].stream, rq.ops[dg].stream);
        EXPECT_LT(sq.timeline[0][dg].start, sq.timeline[0][ag].end) << l;
      } else {
        EXPECT_EQ(rq.ops[ag].stream, rq.ops[dg].stream);
      }
    }
  }
  sp.sequenceParallel = false;
  sp.tpAsyncBackward = false;
  EXPECT_GE(t[indexOf(r, "mb0.l1.b.ln1_bwd")].start, t[indexOf(r, "mb0.l1.b.ar_g1")].end);

  // Domino: chunk 0's drop2 waits for chunk 0's all-reduce, but chunk 1's MLP does not wait for
  // chunk 0's drop2 (it comes first on the compute stream); the same for ln1_bwd.
  sp.schedule = TpSchedule::kDomino;
  sp.recompute = false;
  Workload d;
  ASSERT_EQ(makeTransformerStep(sp, &d), tsrSuccess) << lastErrorMessage();
  const Rank& rd = d.ranks[0];
  const size_t drop0 = indexOf(rd, "mb0.l0c0.drop2"), ar0 = indexOf(rd, "mb0.l0c0.ar2");
  EXPECT_LT(indexOf(rd, "mb0.l0c1.fc2"), drop0);
  EXPECT_NE(std::find(rd.ops[drop0].after.begin(), rd.ops[drop0].after.end(), ar0),
            rd.ops[drop0].after.end());
  EXPECT_DOUBLE_EQ(rd.ops[drop0].bytes, 3.5 * act / 2);
  const size_t lnb0 = indexOf(rd, "mb0.l1c0.b.ln1_bwd"), arg0 = indexOf(rd, "mb0.l1c0.b.ar_g1");
  EXPECT_LT(indexOf(rd, "mb0.l1c1.b.qkv_wgrad"), lnb0);
  EXPECT_NE(std::find(rd.ops[lnb0].after.begin(), rd.ops[lnb0].after.end(), arg0),
            rd.ops[lnb0].after.end());
  StepReport domino;
  ASSERT_EQ(simulateWorkload(d, opt, &domino), tsrSuccess) << lastErrorMessage();
  EXPECT_GE(domino.timeline[0][drop0].start, domino.timeline[0][ar0].end);
  EXPECT_LT(domino.timeline[0][ar0].start, domino.timeline[0][indexOf(rd, "mb0.l0c1.fc2")].end);
}

TEST(TransformerSchedules, TheEmbeddingAndTheLossAreMegatronsKernelsAndCollectives) {
  EngineOptions opt;
  opt.fixedCollectiveUs = 30;
  TransformerSpec sp = smallGpt();  // TP 2, 2 layers, micro-batch 2 of sequence 256, hidden 512
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  const Rank& r = w.ranks[0];
  const double tokens = 2 * 256, act = tokens * 512 * 2, logits = tokens * 1024 / 2;
  auto at = [&](const std::string& id) { return indexOf(r, id); };
  auto bytes = [&](const std::string& id) { return r.ops[at(id)].bytes; };
  // Forward: the vocabulary-parallel lookup (its other ranks' rows zeroed), the TP all-reduce
  // that sums the slices, the position embedding and the transpose, dropout; then the layers.
  EXPECT_LT(at("mb0.embed"), at("mb0.embed_ar"));
  EXPECT_LT(at("mb0.embed_ar"), at("mb0.embed_pos"));
  EXPECT_LT(at("mb0.embed_pos"), at("mb0.embed_drop"));
  EXPECT_LT(at("mb0.embed_drop"), at("mb0.l0.ln1"));
  EXPECT_DOUBLE_EQ(bytes("mb0.embed"), 4 * act);
  EXPECT_EQ(r.ops[at("mb0.embed_ar")].collective, Collective::kAllReduce);
  EXPECT_DOUBLE_EQ(bytes("mb0.embed_ar"), act);
  EXPECT_DOUBLE_EQ(bytes("mb0.embed_pos") + bytes("mb0.embed_drop"), 7.5 * act);
  // The loss: 38 bytes a logit (fp32) in four kernels, between them three all-reduces of 4 bytes
  // a token (the max, the target's logit, the sum).
  const char* chain[] = {"xent",     "xent_max_ar", "xent_sub", "xent_pred_ar",
                         "xent_exp", "xent_sum_ar", "xent_div"};
  double lossBytes = 0;
  for (size_t i = 0; i < 7; ++i) {
    const std::string id = std::string("mb0.") + chain[i];
    if (i > 0) {
      EXPECT_LT(at(std::string("mb0.") + chain[i - 1]), at(id));
    }
    if (i % 2 == 1) {
      EXPECT_EQ(r.ops[at(id)].kind, OpKind::kCollective) << id;
      EXPECT_DOUBLE_EQ(bytes(id), tokens * 4) << id;
    } else {
      lossBytes += bytes(id);
    }
  }
  EXPECT_DOUBLE_EQ(lossBytes, 38 * logits);
  EXPECT_DOUBLE_EQ(bytes("mb0.xent_bwd"), 14 * logits);
  // Backward: the logits' input gradient all-reduced over TP; the final layernorm's backward
  // after it; the embedding's backward writes its slice of the table.
  EXPECT_LT(at("mb0.logits_dgrad"), at("mb0.logits_ar_g"));
  EXPECT_LT(at("mb0.logits_ar_g"), at("mb0.logits_wgrad"));
  EXPECT_DOUBLE_EQ(bytes("mb0.logits_ar_g"), act);
  EXPECT_DOUBLE_EQ(bytes("mb0.ln_f_bwd"), 5 * act);
  EXPECT_LT(at("mb0.ln_f_bwd"), at("mb0.l1.b.drop2_bwd"));
  EXPECT_DOUBLE_EQ(bytes("mb0.embed_bwd"), 2.5 * act + 2 * act + 2 * 512.0 * 512 * 2);

  // Sequence parallelism and the asynchronous backward: the final layernorm on the rank's part of
  // the sequence, all-gathered before the logits; in the backward the input all-gathered again
  // beside the input gradient's GEMM and the gradient reduce-scattered beside the weight's.
  sp.sequenceParallel = true;
  sp.tpAsyncBackward = true;
  Workload q;
  ASSERT_EQ(makeTransformerStep(sp, &q), tsrSuccess) << lastErrorMessage();
  const Rank& rq = q.ranks[0];
  StepReport sq;
  ASSERT_EQ(simulateWorkload(q, opt, &sq), tsrSuccess) << lastErrorMessage();
  const auto& t = sq.timeline[0];
  EXPECT_DOUBLE_EQ(rq.ops[indexOf(rq, "mb0.ln_f")].bytes, act);  // 2 x act / TP
  EXPECT_EQ(indexOf(rq, "mb0.logits"), indexOf(rq, "mb0.logits_ag") + 1);
  const size_t agx = indexOf(rq, "mb0.logits_ag_x"), rs = indexOf(rq, "mb0.logits_rs_g");
  const size_t dgrad = indexOf(rq, "mb0.logits_dgrad"), wgrad = indexOf(rq, "mb0.logits_wgrad");
  EXPECT_NE(rq.ops[agx].stream, rq.ops[dgrad].stream);
  EXPECT_EQ(rq.ops[rs].collective, Collective::kReduceScatter);
  EXPECT_GE(t[wgrad].start, t[agx].end);
  EXPECT_LT(t[wgrad].start, t[rs].end);
  EXPECT_GE(t[indexOf(rq, "mb0.ln_f_bwd")].start, t[rs].end);
}

TEST(TransformerSchedules, OverlapShortensAStepWhoseCommunicationIsExposed) {
  // Domino's example model (GPT-3 6.7B, sequence 1024, micro-batch 8) on one DGX-H100 with TP 8,
  // its collectives simulated on SimGrid: hiding the TP communication must pay.
  TransformerSpec sp;
  sp.layers = 4;
  sp.hidden = 4096;
  sp.heads = 32;
  sp.seq = 1024;
  sp.microBatch = 8;
  sp.globalBatch = 8;
  sp.tp = 8;
  StepReport rep[3];
  for (TpSchedule t : {TpSchedule::kSerial, TpSchedule::kDomino, TpSchedule::kFused}) {
    sp.schedule = t;
    Workload w;
    ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
    ASSERT_EQ(simulateWorkload(w, {}, &rep[static_cast<int>(t)]), tsrSuccess) << lastErrorMessage();
  }
  EXPECT_GT(rep[0].exposedUs, 0.2 * rep[0].stepUs);
  EXPECT_LT(rep[1].exposedUs, 0.5 * rep[0].exposedUs);
  EXPECT_GT(rep[0].stepUs / rep[1].stepUs, 1.1);
  EXPECT_GT(rep[0].stepUs / rep[2].stepUs, 1.05);
  // The layers' and the logits' collectives are fused: what is exposed is the embedding's
  // all-reduce and the loss's three all-reduces of 4 bytes a token, a small part of the step.
  EXPECT_GT(rep[2].exposedUs, 0);
  EXPECT_LT(rep[2].exposedUs, 0.05 * rep[2].stepUs);
  EXPECT_LT(rep[2].exposedUs, 0.2 * rep[0].exposedUs);
}

TEST(TransformerSchedules, OneForwardOneBackwardAfterTheWarmUp) {
  TransformerSpec sp = smallGpt();
  sp.tp = 1;
  sp.pp = 4;
  sp.layers = 4;
  sp.microBatch = 1;
  sp.globalBatch = 6;
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(w.ranks.size(), 4u);
  // Stage s: 3 - s warm-up forwards, then forward and backward in turn, then the backwards.
  for (int s = 0; s < 4; ++s) {
    std::string order;
    for (const Op& op : w.ranks[static_cast<size_t>(s)].ops) {
      if (op.kind != OpKind::kGemm) continue;
      if (op.id.find(".l0.qkv") != std::string::npos && op.id.find(".re.") == std::string::npos)
        order += "F" + op.id.substr(2, op.id.find('.') - 2);
      if (op.id.find(".l0.b.qkv_dgrad") != std::string::npos)
        order += "B" + op.id.substr(2, op.id.find('.') - 2);
    }
    const char* expected[] = {"F0F1F2F3B0F4B1F5B2B3B4B5", "F0F1F2B0F3B1F4B2F5B3B4B5",
                              "F0F1B0F2B1F3B2F4B3F5B4B5", "F0B0F1B1F2B2F3B3F4B4F5B5"};
    EXPECT_EQ(order, expected[s]) << "stage " << s;
  }
  EngineOptions opt;
  opt.fixedCollectiveUs = 10;
  StepReport rep;
  ASSERT_EQ(simulateWorkload(w, opt, &rep), tsrSuccess) << lastErrorMessage();
  EXPECT_GT(rep.stepUs, 0);
}

TEST(TransformerSchedules, InterleavedChunksFollowTheVirtualPipelineAndShortenTheBubble) {
  TransformerSpec sp = smallGpt();
  sp.tp = 1;
  sp.pp = 2;
  sp.layers = 4;
  sp.microBatch = 1;
  sp.globalBatch = 4;
  sp.interleave = 2;
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  // Stage 1: warm-up of 2 (PP - 2) + (v - 1) PP = 2 forwards, then one and one, then the rest.
  std::string order;
  for (const Op& op : w.ranks[1].ops) {
    if (op.id.size() > 12 && op.id.compare(op.id.size() - 7, 7, ".l0.qkv") == 0)
      order += "F" + op.id.substr(2, op.id.find(".l0") - 2);
    if (op.id.find(".l0.b.qkv_dgrad") != std::string::npos)
      order += "B" + op.id.substr(2, op.id.find(".l0") - 2);
  }
  EXPECT_EQ(order,
            "F0.v0F1.v0F0.v1B0.v1F1.v1B1.v1F2.v0B0.v0F3.v0B1.v0F2.v1B2.v1F3.v1B3.v1B2.v0B3.v0");
  // Stage 0 sends chunk 1's gradients nowhere, and takes chunk 1's activations from stage 1.
  EXPECT_EQ(w.ranks[0].ops[indexOf(w.ranks[0], "mb0.v1.recv_act")].peer, 1);
  EngineOptions opt;
  opt.fixedCollectiveUs = 10;
  StepReport inter, plain;
  ASSERT_EQ(simulateWorkload(w, opt, &inter), tsrSuccess) << lastErrorMessage();
  sp.interleave = 1;
  sp.globalBatch = 4;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(w, opt, &plain), tsrSuccess) << lastErrorMessage();
  EXPECT_LT(inter.stepUs, plain.stepUs);
  sp.interleave = 3;  // 4 layers do not split into 2 stages x 3 chunks
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
}

TEST(TransformerSchedules, PipelineExchangesScatterGatherAndBlockAsMegatron2021) {
  TransformerSpec sp = smallGpt();  // TP 2, 4 micro-batches of 2 x 256 tokens, hidden 512
  sp.pp = 2;
  sp.ppScatterGather = true;
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  const double act = 2.0 * 256 * 512 * 2;  // bytes of one micro-batch's activation
  const Rank& s0 = w.ranks[0];
  const Rank& s1 = w.ranks[1];
  // Half of it goes over the wire from each TP rank; the receivers all-gather the whole of it
  // over their TP group before the stage's first op uses it.
  EXPECT_EQ(s0.ops[indexOf(s0, "mb0.send_act")].bytes, act / 2);
  const size_t recv = indexOf(s1, "mb0.recv_act"), gather = indexOf(s1, "mb0.recv_act.gather");
  EXPECT_EQ(s1.ops[recv].bytes, act / 2);
  const Op& g = s1.ops[gather];
  EXPECT_EQ(g.kind, OpKind::kCollective);
  EXPECT_EQ(g.collective, Collective::kAllGather);
  EXPECT_EQ(w.groups[static_cast<size_t>(g.group)].size, 2);
  EXPECT_EQ(g.bytes, act);
  EXPECT_NE(std::find(g.after.begin(), g.after.end(), recv), g.after.end());
  const Op& ln1 = s1.ops[indexOf(s1, "mb0.l0.ln1")];
  EXPECT_NE(std::find(ln1.after.begin(), ln1.after.end(), gather), ln1.after.end());
  EXPECT_EQ(s0.ops[indexOf(s0, "mb0.recv_grad.gather")].bytes, act);
  // With sequence parallelism the activation is split already: 1/TP of it, and no gather.
  sp.sequenceParallel = true;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(w.ranks[0].ops[indexOf(w.ranks[0], "mb0.send_act")].bytes, act / 2);
  for (const Op& op : w.ranks[1].ops) EXPECT_EQ(op.id.find(".gather"), std::string::npos);
  sp.sequenceParallel = false;
  sp.ppScatterGather = false;  // off: the whole activation from every TP rank
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(w.ranks[0].ops[indexOf(w.ranks[0], "mb0.send_act")].bytes, act);

  // Blocking: the compute stream goes on after a send only when the send is done.
  sp.ppBlocking = true;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  EngineOptions opt;
  opt.fixedCollectiveUs = 10;
  StepReport blocking, overlapped;
  ASSERT_EQ(simulateWorkload(w, opt, &blocking), tsrSuccess) << lastErrorMessage();
  const Rank& b0 = w.ranks[0];
  size_t sends = 0;
  for (size_t i = 0; i < b0.ops.size(); ++i) {
    if (b0.ops[i].kind != OpKind::kSend) continue;
    ++sends;
    const size_t done = indexOf(b0, b0.ops[i].id + ".done");
    EXPECT_EQ(b0.ops[done].stream, b0.ops[indexOf(b0, "mb0.l0.qkv")].stream);
    // The next compute op starts when the send has ended, not before.
    ASSERT_LT(done + 1, b0.ops.size());
    EXPECT_GE(blocking.timeline[0][done + 1].start, blocking.timeline[0][i].end) << b0.ops[i].id;
  }
  EXPECT_EQ(sends, 4u);
  sp.ppBlocking = false;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(w, opt, &overlapped), tsrSuccess) << lastErrorMessage();
  EXPECT_GT(blocking.stepUs, overlapped.stepUs);
}

TEST(TransformerSchedules, DecodeSendsEachTokenBackToTheFirstStage) {
  TransformerSpec sp = smallGpt();
  sp.tp = 1;
  sp.pp = 2;
  sp.microBatch = 1;
  sp.globalBatch = 2;
  sp.inference = true;
  sp.decodeTokens = 2;
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  const Rank& first = w.ranks[0];
  const Rank& last = w.ranks[1];
  // The prefill's token and token 0's come back; token 1 is the last.
  EXPECT_EQ(last.ops[indexOf(last, "mb1.send_ids")].peer, 0);
  EXPECT_EQ(last.ops[indexOf(last, "mb1.t0.send_ids")].peer, 0);
  for (const Op& op : last.ops) EXPECT_NE(op.id, "mb0.t1.send_ids");
  size_t recv = indexOf(first, "mb0.t1.recv_ids");
  EXPECT_LT(recv, indexOf(first, "mb0.t1.l0.attn_decode"));
  // One new token per sequence.
  EXPECT_EQ(first.ops[indexOf(first, "mb0.t1.l0.qkv")].gemm.m, 1u);
  EngineOptions opt;
  opt.fixedCollectiveUs = 5;
  StepReport rep;
  ASSERT_EQ(simulateWorkload(w, opt, &rep), tsrSuccess) << lastErrorMessage();
  EXPECT_GT(rep.timeline[0][recv].start, 0);
  sp.inference = false;
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
}

TEST(TransformerSchedules, AFoldedStepEqualsTheStepWithEveryGpu) {
  // 16 GPUs on two nodes: TP 4 inside a node, PP 2, DP 2 across the nodes (each TP rank's DP
  // traffic on its own NIC rail); collectives in closed form so the comparison is exact.
  TransformerSpec sp = smallGpt();
  sp.tp = 4;
  sp.pp = 2;
  sp.dp = 2;
  sp.globalBatch = 8;
  sp.recompute = true;
  EngineOptions opt;
  opt.fixedCollectiveUs = 25;
  Workload folded, every;
  ASSERT_EQ(makeTransformerStep(sp, &folded), tsrSuccess) << lastErrorMessage();
  sp.unfold = true;
  ASSERT_EQ(makeTransformerStep(sp, &every), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(folded.ranks.size(), 2u);
  EXPECT_EQ(every.ranks.size(), 16u);
  StepReport a, b;
  ASSERT_EQ(simulateWorkload(folded, opt, &a), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(every, opt, &b), tsrSuccess) << lastErrorMessage();
  EXPECT_NEAR(a.stepUs, b.stepUs, 1e-6 * b.stepUs);
  EXPECT_NEAR(a.tflopsPerGpu, b.tflopsPerGpu, 1e-6 * b.tflopsPerGpu);
}

TEST(TransformerSchedules, SelectiveRecomputationRunsAttentionsCoreAgainBeforeItsBackward) {
  TransformerSpec sp = smallGpt();
  sp.recomputeSelective = true;
  Workload w;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  const Rank& r = w.ranks[0];
  // In the backward of layer 1 (the first one back): after the projection's gradients, QK^T,
  // softmax, PV and the context's copy again (Megatron-LM's checkpointed core attention), then
  // attention's backward; nothing else of the layer runs again.
  const size_t wgrad = indexOf(r, "mb0.l1.b.proj_wgrad"), qk = indexOf(r, "mb0.l1.b.re.qk");
  const size_t soft = indexOf(r, "mb0.l1.b.re.softmax"), pv = indexOf(r, "mb0.l1.b.re.pv");
  const size_t back = indexOf(r, "mb0.l1.b.dpv_dp");
  EXPECT_LT(wgrad, qk);
  EXPECT_LT(qk, soft);
  EXPECT_LT(soft, pv);
  EXPECT_LT(pv, back);
  size_t again = 0, full = 0;
  for (const Op& op : r.ops) {
    again += op.id.find(".re.") != std::string::npos;
    full += op.id.find(".re.qkv") != std::string::npos;
  }
  EXPECT_EQ(again, 4u * 2 * 4);  // QK^T, softmax, PV, the context's copy; 2 layers; 4 micro-batches
  EXPECT_EQ(full, 0u);
  // The model's FLOPs do not count it (model FLOPs), so its TFLOP/s is below the step without.
  Workload none;
  sp.recomputeSelective = false;
  ASSERT_EQ(makeTransformerStep(sp, &none), tsrSuccess);
  EXPECT_EQ(w.modelFlops, none.modelFlops);
  StepReport a, b;
  ASSERT_EQ(simulateWorkload(w, {}, &a), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(none, {}, &b), tsrSuccess) << lastErrorMessage();
  EXPECT_GT(a.stepUs, b.stepUs);
  // With FlashAttention there is nothing to recompute; with full recomputation it is refused.
  sp.flashAttention = true;
  sp.recomputeSelective = true;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess);
  for (const Op& op : w.ranks[0].ops) EXPECT_EQ(op.id.find(".re."), std::string::npos) << op.id;
  // A causal FlashAttention kernel does the lower triangle only: half of QK^T's and PV's 4 B s^2 h
  // FLOPs a layer (one TP rank's share), and its backward 2.5 times that.
  const double causal = 0.5 * 4 * sp.microBatch * double(sp.seq) * sp.seq * sp.hidden / sp.tp;
  int seen = 0;
  for (const Op& op : w.ranks[0].ops) {
    if (op.id == "mb0.l0.attn") {
      EXPECT_NEAR(op.flops, causal, 1e-6 * causal);
      ++seen;
    }
    if (op.id == "mb0.l0.b.attn_bwd") {
      EXPECT_NEAR(op.flops, 2.5 * causal, 1e-6 * causal);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
  sp.recompute = true;
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("exclude each other"), std::string::npos);
}

TEST(TransformerSchedules, MemoryEstimateIsStatesPlusActivationsInFlight) {
  TransformerSpec sp;
  sp.layers = 2;
  sp.hidden = 1024;
  sp.heads = 16;
  sp.seq = 512;
  sp.vocab = 1024;
  sp.globalBatch = 1;
  // 2 (12 h^2 + 13 h) + V h parameters at 18 B; 2 layers of s b h (10 + 24 + 5 a s / h).
  const double params = 2 * (12.0 * 1024 * 1024 + 13 * 1024) + 1024.0 * 1024;
  const double layer = 512.0 * 1024 * (10 + 24 + 5.0 * 16 * 512 / 1024);
  EXPECT_NEAR(transformerMemoryBytes(sp), params * 18 + 2 * layer, 1);
  sp.recompute = true;  // the layers' inputs, and one layer's activations while recomputed
  EXPECT_NEAR(transformerMemoryBytes(sp), params * 18 + 2 * 2 * 512.0 * 1024 + layer, 1);
  sp.recompute = false;
  sp.recomputeSelective = true;  // the attention scores' 5 a s / h are not kept
  EXPECT_NEAR(transformerMemoryBytes(sp), params * 18 + 2 * 512.0 * 1024 * (10 + 24), 1);
  GpuModel g;
  ASSERT_EQ(gpuModelPreset("h200", &g), tsrSuccess);
  EXPECT_EQ(g.memCapacityGB, 141);
}

TEST(TransformerSchedules, AsyncBackwardAllReduceRunsBesideTheWeightGradient) {
  TransformerSpec sp = smallGpt();  // TP 2, PP 1, 4 micro-batches, 2 layers
  EngineOptions opt;
  opt.fixedCollectiveUs = 50;
  Workload w;
  StepReport serial, serialSp, async;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(w, opt, &serial), tsrSuccess) << lastErrorMessage();
  sp.sequenceParallel = true;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(w, opt, &serialSp), tsrSuccess) << lastErrorMessage();
  for (bool seqPar : {false, true}) {
    sp.sequenceParallel = seqPar;
    sp.tpAsyncBackward = true;
    ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
    ASSERT_EQ(simulateWorkload(w, opt, &async), tsrSuccess) << lastErrorMessage();
    const Rank& r = w.ranks[0];
    const auto& t = async.timeline[0];
    const std::string g2 = seqPar ? "mb1.l1.b.rs_g2" : "mb1.l1.b.ar_g2";
    const std::string g1 = seqPar ? "mb1.l0.b.rs_g1" : "mb1.l0.b.ar_g1";
    const size_t coll = indexOf(r, g2), wgrad = indexOf(r, "mb1.l1.b.fc1_wgrad");
    const size_t next = indexOf(r, "mb1.l1.b.ln2_bwd");
    EXPECT_NE(r.ops[coll].stream, r.ops[wgrad].stream)
        << "the collective leaves the compute stream";
    // The weight gradient runs while the collective does; the next block waits for it.
    EXPECT_LT(t[wgrad].start, t[coll].end) << seqPar;
    EXPECT_GE(t[next].start, t[coll].end) << seqPar;
    // A layer's input layernorm's backward waits for its input gradient's collective, and the
    // layer below (or the embedding's backward) for it.
    const std::string g1top = seqPar ? "mb1.l1.b.rs_g1" : "mb1.l1.b.ar_g1";
    const size_t ln1top = indexOf(r, "mb1.l1.b.ln1_bwd"), ln1 = indexOf(r, "mb1.l0.b.ln1_bwd");
    EXPECT_GE(t[ln1top].start, t[indexOf(r, g1top)].end);
    EXPECT_GE(t[indexOf(r, "mb1.l0.b.drop2_bwd")].start, t[ln1top].end);
    EXPECT_GE(t[ln1].start, t[indexOf(r, g1)].end);
    EXPECT_GE(t[indexOf(r, "mb1.embed_bwd")].start, t[ln1].end);
    EXPECT_LT(async.stepUs, seqPar ? serialSp.stepUs : serial.stepUs) << seqPar;
  }
}

TEST(TransformerSchedules, TheOptimizerAndGradientAccumulationAreMemoryKernels) {
  TransformerSpec sp = smallGpt();  // TP 2, PP 1, 4 micro-batches, 2 layers, hidden 512
  EngineOptions opt;
  opt.fixedCollectiveUs = 10;
  Workload w;
  StepReport fused, separate, bigStep;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(w, opt, &fused), tsrSuccess) << lastErrorMessage();
  for (const Op& op : w.ranks[0].ops) EXPECT_EQ(op.id.find("grad_acc"), std::string::npos);
  const double H = 512, T = 2, V = 1024;
  const double layerParams = (12 * H * H + 13 * H) / T, embed = V * H / T;
  const Rank& r = w.ranks[0];
  EXPECT_DOUBLE_EQ(r.ops[indexOf(r, "optimizer")].bytes, (2 * layerParams + embed) * 30);

  // Accumulation as a kernel of its own: after each layer's backward of every micro-batch but
  // the first, and once for the embedding's gradient.
  sp.gradAccumBytes = 6;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(w, opt, &separate), tsrSuccess) << lastErrorMessage();
  const Rank& a = w.ranks[0];
  int layerAcc = 0, embedAcc = 0;
  for (const Op& op : a.ops) {
    if (op.id.find("grad_acc") == std::string::npos) continue;
    EXPECT_EQ(op.kind, OpKind::kMemory) << op.id;
    EXPECT_NE(op.id.rfind("mb0.", 0), 0u) << "the first micro-batch has nothing to add to";
    if (op.id.find("embed_grad_acc") != std::string::npos) {
      ++embedAcc;
      EXPECT_DOUBLE_EQ(op.bytes, embed * 6);
    } else {
      ++layerAcc;
      EXPECT_DOUBLE_EQ(op.bytes, layerParams * 6);
    }
  }
  EXPECT_EQ(layerAcc, 3 * 2);
  EXPECT_EQ(embedAcc, 3);
  EXPECT_GT(indexOf(a, "mb2.l1.grad_acc"), indexOf(a, "mb2.l1.b.qkv_wgrad"));
  EXPECT_LT(indexOf(a, "mb2.l1.grad_acc"), indexOf(a, "mb2.l0.b.drop2_bwd"));
  EXPECT_EQ(a.ops[indexOf(a, "mb2.l1.grad_acc")].stream,
            a.ops[indexOf(a, "mb2.l1.b.qkv_wgrad")].stream);
  // On the compute stream, beside nothing: the step grows by exactly their memory time.
  GpuModel gpu;
  ASSERT_EQ(gpuModelPreset("h100", &gpu), tsrSuccess);
  EXPECT_NEAR(separate.stepUs - fused.stepUs,
              6 * memoryUs(gpu, layerParams * 6) + 3 * memoryUs(gpu, embed * 6),
              1e-6 * fused.stepUs);

  // A step moving 54 bytes a parameter (Megatron-LM's mixed-precision step) instead of 30.
  sp.gradAccumBytes = 0;
  sp.optimizerBytes = 54;
  ASSERT_EQ(makeTransformerStep(sp, &w), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(simulateWorkload(w, opt, &bigStep), tsrSuccess) << lastErrorMessage();
  const double params = 2 * layerParams + embed;
  EXPECT_DOUBLE_EQ(w.ranks[0].ops[indexOf(w.ranks[0], "optimizer")].bytes, params * 54);
  EXPECT_NEAR(bigStep.stepUs - fused.stepUs,
              memoryUs(gpu, params * 54) - memoryUs(gpu, params * 30), 1e-6 * fused.stepUs);

  sp.optimizerBytes = -1;
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("optimizer"), std::string::npos);
  sp.optimizerBytes = 30;
  sp.gradAccumBytes = 1e9;
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("accumulation"), std::string::npos);
}

TEST(TransformerSchedules, BadShapesGetASentence) {
  TransformerSpec sp = smallGpt();
  Workload w;
  sp.layers = 3;
  sp.pp = 2;
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("PP stages"), std::string::npos);
  sp = smallGpt();
  sp.tp = 16;
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
  sp = smallGpt();
  sp.globalBatch = 7;
  EXPECT_NE(makeTransformerStep(sp, &w), tsrSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("global batch"), std::string::npos);
}

// ---- The fused model ----

TEST(FusedModel, TilesWaitForTheirShardAndPutsFollowTheirTiles) {
  // AllGather+GEMM on 2 ranks, one 128 x 128 tile per segment, 1 SM, 10 us per tile; a shard
  // (128 rows x 64 columns of K, 2 bytes) takes 16384 B / 1000 B/us = 16.384 us + 1 us.
  fused::FusedModelInput in;
  in.op = fused::FusedOp::kAllGatherGemm;
  in.nranks = 2;
  in.m = 256;
  in.n = 128;
  in.k = 64;
  in.elemBytes = 2;
  in.tiles.tileM = 128;
  in.tiles.tileN = 128;
  in.sms = 1;
  in.tileUs = 10;
  in.linkBytesPerUs = 1000;
  in.linkLatencyUs = 1;
  in.memBytesPerUs = 1e9;
  fused::FusedModelResult r;
  ASSERT_TRUE(fused::simulateFused(in, &r));
  EXPECT_EQ(r.tiles, 2u);
  // The local tile 0..10; the peer's shard lands at 17.384, its tile ends at 27.384.
  EXPECT_NEAR(r.us, 17.384 + 10, 1e-9);
  // GEMM+ReduceScatter: the remote segment's tile first (0..10), its 128*128*2 B put takes
  // 32.768 us + 1, then the own tile (10..20); the last partial lands at 43.768, the reduction
  // of 3 segments' worth of 32768 B at 1e9 B/us adds ~0.
  in.op = fused::FusedOp::kGemmReduceScatter;
  ASSERT_TRUE(fused::simulateFused(in, &r));
  EXPECT_EQ(r.puts, 1u);
  EXPECT_NEAR(r.gemmUs, 20, 1e-9);
  EXPECT_NEAR(r.us, 10 + 32.768 + 1 + 3 * 32768 / 1e9, 1e-9);
  EXPECT_NEAR(r.commTailUs, r.us - 20, 1e-9);
  in.m = 255;  // not a multiple of the ranks
  EXPECT_FALSE(fused::simulateFused(in, &r));
}

}  // namespace
}  // namespace tessera::workload
