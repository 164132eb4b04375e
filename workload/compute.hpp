// The compute model of the workload simulator (DESIGN.md, "Workloads"): how long one GPU takes for
// a GEMM, a memory-bound operation or an attention kernel, and how much of it a collective's CTAs
// running beside it take away.
//
// A GEMM C[m x n] = A[m x k] B[k x n] (`batch` of them) is cut into tiles of tileM x tileN; the
// tiles run in waves of one tile per SM, so a GEMM of 133 tiles on 132 SMs takes two waves (wave
// quantization), and a tile's last row or column of tiles costs a whole tile (tile quantization).
// A GEMM of fewer rows than a tile runs tiles of its rows (rounded up to 16), and one of fewer
// tiles than SMs splits K across the SMs (split-K), as cuBLAS does for skinny GEMMs, writing and
// reading back its partial sums (4 bytes an element a split). The GEMM runs with whichever of the
// preset's tile shapes (tileM x tileN, then `moreTiles`), split or not, takes least time, as
// cuBLAS's heuristic picks a kernel per shape. One tile takes 2 * rows * cols * k FLOPs at the
// SM's share of the dense peak times `gemmEfficiency` (the tile's main loop), and each wave
// `gemmWaveUs` more (a tile's loads before its first MMA and its epilogue, which a short K does
// not hide); the GEMM takes at least the time its operands, result and partial sums need from
// memory, plus `gemmFixedUs` once (the kernel's ramp and drain). A preset's `gemmEfficiency` is
// the best GEMM a search of shapes measured (the ceiling); gemmCalibrate derives it instead from
// one measured GEMM, its shape and its share of the peak: the main-loop rate at which the model
// takes that GEMM's measured time.
// A memory-bound operation moves its bytes at memGBs * memEfficiency; attention takes the longer
// of its FLOPs at the peak times `attentionEfficiency` and its bytes from memory. Every kernel
// adds `launchUs`.
//
// Interference: a collective beside a kernel holds `commSms` SMs (its CTAs) and a share of the
// memory bandwidth; the GEMM's waves then run on the SMs left (recomputed quantization), a
// memory-bound kernel gets the bandwidth left. Every constant of a preset names its source.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace tessera::workload {

enum class DType : uint8_t { kBf16, kFp16, kFp32, kTf32, kFp8 };
const char* dtypeName(DType t);
Result dtypeParse(const std::string& s, DType* out);
int dtypeBytes(DType t);

struct GpuModel {
  std::string name;
  std::string source;  // where every number below comes from
  int sms = 0;
  // Dense tensor-core peak per type, TFLOP/s (fp32: the CUDA cores, no tensor cores).
  double bf16Tflops = 0, fp16Tflops = 0, tf32Tflops = 0, fp8Tflops = 0, fp32Tflops = 0;
  double memGBs = 0;               // HBM bandwidth, GB/s
  double memCapacityGB = 0;        // HBM capacity, GB
  double gemmEfficiency = 1;       // a tile's main loop's share of the peak (measured, cited)
  double attentionEfficiency = 1;  // attention kernels' share of the peak
  double memEfficiency = 1;        // the share of memGBs a streaming kernel reaches
  int tileM = 128, tileN = 256;    // the GEMM's largest CTA tile (the fused kernels' tile)
  // Further tile shapes a GEMM may run with (rows x columns), beside tileM x tileN.
  std::vector<std::array<int, 2>> moreTiles;
  double gemmFixedUs = 0;  // a GEMM kernel's time beyond its waves (calibrated, cited)
  double gemmWaveUs = 0;   // each wave's time beyond its tiles' main loops (calibrated, cited)
  double launchUs = 0;     // per kernel
  double peakTflops(DType t) const;
};

// Names accepted by gpuModelPreset: a100, h100, h800, h200.
const std::vector<std::string>& gpuModelNames();
Result gpuModelPreset(const std::string& name, GpuModel* out);

// Work shared with a collective on the same GPU while a kernel runs.
struct Interference {
  int commSms = 0;        // SMs the collective's CTAs hold
  double commMemGBs = 0;  // memory bandwidth its copies and reductions use
};

struct GemmShape {
  uint64_t m = 0, n = 0, k = 0, batch = 1;
  DType dtype = DType::kBf16;
};
double gemmFlops(const GemmShape& g);
// Tiles and waves of a GEMM on `sms` SMs, with the tile shape it runs with there.
uint64_t gemmTiles(const GpuModel& gpu, const GemmShape& g);
uint64_t gemmWaves(const GpuModel& gpu, const GemmShape& g, int sms);
// tsrSuccess when `value` is a share of the peak (above 0, at most 1); otherwise a sentence naming
// `what` ("a GEMM", "an attention") and the value.
Result checkShareOfPeak(double value, const char* what);
// Sets gpu->gemmEfficiency to the main-loop rate at which the model's kernel time of `measured`
// (gemmUs less the launch gap, at the GPU's fixed and per-wave costs) is its FLOPs at
// `efficiency` of the peak. Refused with a sentence, the model unchanged, when `efficiency` is
// not in (0, 1], a dimension is 0, or the measurement is shorter than the model takes at the
// full peak (its overheads and memory traffic).
Result gemmCalibrate(GpuModel* gpu, const GemmShape& measured, double efficiency);
// Time in microseconds (launch included).
double gemmUs(const GpuModel& gpu, const GemmShape& g, const Interference& with = {});
double memoryUs(const GpuModel& gpu, double bytes, const Interference& with = {});
double attentionUs(const GpuModel& gpu, double flops, double bytes, DType t,
                   const Interference& with = {});

}  // namespace tessera::workload
