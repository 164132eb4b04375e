// GPU presets and the GEMM, memory and attention times (compute.hpp).
#include "workload/compute.hpp"

#include <algorithm>
#include <cmath>

#include "core/log.hpp"

namespace tessera::workload {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// The best GEMM each GPU reached in Stas Bekman's "Maximum Achievable Matmul FLOPS" search
// (stas00/ml-engineering, compute/accelerator/README.md, its MAMF table: CUDA 12.1, bf16): A100
// SXM 267.9 TFLOP/s (at 6912 x 16384 x 2048), H100 SXM 792.1 (at 6144 x 17920 x 2816), over the
// datasheet peaks (312, 989.4). The best over a search of shapes, large K included, is taken as
// the ceiling that a tile's main loop runs at: no GEMM of the model runs faster. (A single
// measured GEMM, not a search's best, gives the rate at its own shape instead: gemmCalibrate.)
constexpr double kA100GemmEfficiency = 267.9 / 312.0;
constexpr double kH100GemmEfficiency = 792.1 / 989.4;
// FlashAttention-2 (Dao, 2023): forward and backward at 50-73% of the A100's peak; the midpoint.
constexpr double kAttentionEfficiency = 0.615;
// A GEMM kernel's fixed time (its ramp and drain), each wave's time beyond its tiles' main loops
// (a tile's loads before its first MMA and its epilogue), and the tile shapes it may run with:
// calibrated on OpenXLA's table of measured H100 GEMM kernels
// (tensorflow/tensorflow third_party/xla/xla/service/gpu/model/matmul_interpolator_data.h,
// sm_90 bf16): the even rows of perf/sim_gemm_validate.py's 32 fitted them (2.25 us and 1.9 us
// a wave, least squares of the relative error, at the H100's MAMF ceiling; with the two largest
// of cuBLAS's typical tiles, 128 x 256 and 128 x 128, and split-K's partial sums), the odd rows
// are held out. The table's 4096 x 4096 GEMMs with K from 256 to 4096 (4 waves each) take about
// 9 us plus 0.041 us per K: a cost per wave that a fixed cost per kernel alone misses. Assumed
// the same on the other GPUs (no such table for them).
constexpr double kGemmFixedUs = 2.25;
constexpr double kGemmWaveUs = 1.9;
// A streaming kernel's share of the HBM line rate, as copies measure it. A100 SXM4 80GB:
// BabelStream's Copy at 1709.4 GB/s of 2039 (UKRI's BabelStream benchmark page, run on Tursa's
// A100-SXM4-80GB: ukri-bench/benchmark-BabelStream README.md, commit 464294e; its Triad 1724.8).
// Hopper: a device-to-device copy through PyTorch at about 3.0 TB/s of 3.35 on an H100 80GB HBM3
// and 4.3 of 4.8 on an H200, on the machines lent to this project (the device tool's KINDS.md,
// 2026-10 and 2026-11); the H800 as the H100.
constexpr double kAmpereMemEfficiency = 1709.4 / 2039.0;
constexpr double kHopperMemEfficiency = 0.9;
// An eager framework's gap between kernels: assumed, as above.
constexpr double kLaunchUs = 4.0;

// A preset: the numbers that differ between GPUs; tiles, the fixed cost, attention's efficiency
// and the launch cost are the same for all.
GpuModel preset(const char* name, const std::string& source, int sms, double bf16, double tf32,
                double fp8, double fp32, double memGBs, double capacityGB, double gemmEfficiency,
                double memEfficiency) {
  GpuModel g;
  g.name = name;
  g.source = source;
  g.sms = sms;
  g.bf16Tflops = bf16;
  g.fp16Tflops = bf16;
  g.tf32Tflops = tf32;
  g.fp8Tflops = fp8;
  g.fp32Tflops = fp32;
  g.memGBs = memGBs;
  g.memCapacityGB = capacityGB;
  g.attentionEfficiency = kAttentionEfficiency;
  g.memEfficiency = memEfficiency;
  g.tileM = 128;
  g.tileN = 256;
  g.moreTiles = {{128, 128}};
  g.gemmFixedUs = kGemmFixedUs;
  g.gemmWaveUs = kGemmWaveUs;
  g.gemmEfficiency = gemmEfficiency;
  g.launchUs = kLaunchUs;
  return g;
}

// The A100's GPU (A100, and A800 with its NVLink cut): no FP8 tensor cores.
GpuModel ampere(const char* name, const std::string& source) {
  return preset(name, source, 108, 312, 156, 0, 19.5, 2039, 80, kA100GemmEfficiency,
                kAmpereMemEfficiency);
}

GpuModel hopper(const char* name, const std::string& source, double memGBs, double capacityGB) {
  return preset(name, source, 132, 989.4, 494.7, 1978.9, 66.9, memGBs, capacityGB,
                kH100GemmEfficiency, kHopperMemEfficiency);
}

constexpr const char* kAssumed =
    "; GEMMs in 128 x 256 or 128 x 128 tiles, 2.25 us per kernel and 1.9 us per wave (fitted on "
    "OpenXLA's measured H100 GEMM kernels); attention at 61.5% of peak (FlashAttention-2's "
    "50-73% on A100, midpoint); 4 us per kernel launch assumed (not measured)";

}  // namespace

const char* dtypeName(DType t) {
  switch (t) {
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
    case DType::kFp8: return "fp8";
  }
  return "?";
}

Result dtypeParse(const std::string& s, DType* out) {
  for (DType t : {DType::kBf16, DType::kFp16, DType::kFp32, DType::kTf32, DType::kFp8}) {
    if (s == dtypeName(t)) {
      *out = t;
      return tsrSuccess;
    }
  }
  return TSR_FAIL(tsrInvalidArgument, "unknown type \"%s\" (bf16, fp16, fp32, tf32, fp8)",
                  s.c_str());
}

int dtypeBytes(DType t) {
  switch (t) {
    case DType::kFp8: return 1;
    case DType::kBf16:
    case DType::kFp16: return 2;
    case DType::kFp32:
    case DType::kTf32: return 4;
  }
  return 4;
}

double GpuModel::peakTflops(DType t) const {
  switch (t) {
    case DType::kBf16: return bf16Tflops;
    case DType::kFp16: return fp16Tflops;
    case DType::kTf32: return tf32Tflops;
    case DType::kFp8: return fp8Tflops;
    case DType::kFp32: return fp32Tflops;
  }
  return bf16Tflops;
}

const std::vector<std::string>& gpuModelNames() {
  static const std::vector<std::string> kNames = {"a100", "a800", "h100", "h800", "h200"};
  return kNames;
}

Result gpuModelPreset(const std::string& name, GpuModel* out) {
  static const std::string a100 =
      std::string(
          "NVIDIA A100 SXM4 80GB datasheet and A100 whitepaper: 108 SMs, 312 TFLOP/s BF16/FP16 "
          "dense, 156 TF32, 19.5 FP32, 80 GB HBM2e at 2039 GB/s; GEMMs' main loops at 85.9% of "
          "peak (the best GEMM measured by the MAMF finder, 267.9 TFLOP/s at 6912 x 16384 x 2048); "
          "memory kernels at 83.8% of HBM (BabelStream's Copy on an A100-SXM4-80GB, 1709.4 GB/s)") +
      kAssumed;
  static const std::string a800 =
      std::string(
          "NVIDIA A800 SXM4 80GB datasheet (the A100 SXM4 80GB's GPU with NVLink cut to 400 GB/s): "
          "108 SMs, 312 TFLOP/s BF16/FP16 dense, 80 GB HBM2e at 2039 GB/s; GEMMs as measured on "
          "A100 (85.9% at 6912 x 16384 x 2048), memory kernels as on A100 (83.8% of HBM)") +
      kAssumed;
  static const std::string h100 =
      std::string(
          "NVIDIA H100 SXM5 datasheet and Hopper whitepaper: 132 SMs, 989.4 TFLOP/s BF16/FP16 "
          "dense, 494.7 TF32, 1978.9 FP8, 66.9 FP32, 80 GB HBM3 at 3350 GB/s; GEMMs' main loops at "
          "80.1% of peak (the best GEMM measured by the MAMF finder, 792.1 TFLOP/s at 6144 x 17920 "
          "x 2816); memory kernels at 90% of HBM (a device-to-device copy measured at about 3.0 "
          "TB/s)") +
      kAssumed;
  static const std::string h800 =
      std::string(
          "NVIDIA H800 SXM5 datasheet (the H100 SXM5's GPU with NVLink cut to 400 GB/s): 132 SMs, "
          "989.4 TFLOP/s BF16 dense, 80 GB HBM3 at 3350 GB/s; GEMMs and memory kernels as measured "
          "on H100 (80.1% at 6144 x 17920 x 2816, 90%)") +
      kAssumed;
  static const std::string h200 =
      std::string(
          "NVIDIA H200 SXM datasheet: the H100's GPU (132 SMs, 989.4 TFLOP/s BF16 dense) with "
          "141 GB HBM3e at 4800 GB/s; GEMMs as measured on H100 (80.1% at 6144 x 17920 x 2816); "
          "memory kernels at 90% of HBM (a device-to-device copy measured at about 4.3 TB/s)") +
      kAssumed;
  if (name == "a100") {
    *out = ampere("a100", a100);
  } else if (name == "a800") {
    *out = ampere("a800", a800);
  } else if (name == "h100") {
    *out = hopper("h100", h100, 3350, 80);
  } else if (name == "h800") {
    *out = hopper("h800", h800, 3350, 80);
  } else if (name == "h200") {
    *out = hopper("h200", h200, 4800, 141);
  } else {
    return TSR_FAIL(tsrInvalidArgument, "unknown GPU \"%s\" (a100, a800, h100, h800, h200)",
                    name.c_str());
  }
  return tsrSuccess;
}

double gemmFlops(const GemmShape& g) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
         static_cast<double>(g.batch);
}

namespace {
// A tiling of a GEMM on `sms` SMs with tiles of tm x tn: rows per tile (a GEMM of fewer rows than
// a tile uses its rows rounded up to 16, the tensor cores' granule), tiles, and the split of K
// that spreads a GEMM of fewer tiles than SMs over them (split-K, as cuBLAS picks for skinny
// GEMMs; at least 256 of K per split).
struct Tiling {
  uint64_t cols = 0, rows = 0, tiles = 0, splitK = 1;
};
Tiling tiling(uint64_t tm, uint64_t tn, const GemmShape& g, int sms) {
  Tiling t;
  t.cols = tn;
  t.rows = g.m < tm ? (g.m + 15) / 16 * 16 : tm;
  t.tiles = (g.m + t.rows - 1) / t.rows * ((g.n + tn - 1) / tn) * g.batch;
  const uint64_t s = static_cast<uint64_t>(std::max(1, sms));
  if (t.tiles < s) t.splitK = std::max<uint64_t>(1, std::min(s / t.tiles, g.k / 256));
  return t;
}

double memRate(const GpuModel& gpu, const Interference& with) {
  // The collective's copies take their bandwidth first; a kernel keeps at least a tenth.
  double full = gpu.memGBs * gpu.memEfficiency;
  return std::max(full - with.commMemGBs, 0.1 * full) * 1e3;  // bytes per microsecond
}
int smsLeft(const GpuModel& gpu, const Interference& with) {
  return std::max(1, gpu.sms - with.commSms);
}

uint64_t waves(const Tiling& t, int sms) {
  const uint64_t s = static_cast<uint64_t>(std::max(1, sms));
  return (t.tiles * t.splitK + s - 1) / s;
}

// The kernel time of a GEMM with tiling t (no fixed cost, no launch): its waves, or its bytes
// (operands, result and split-K's partial sums, written and read back in fp32) from memory.
double tilingUs(const GpuModel& gpu, const GemmShape& g, const Tiling& t, int sms,
                double memBytesPerUs) {
  const double perSm = gpu.peakTflops(g.dtype) * 1e6 * gpu.gemmEfficiency / gpu.sms;  // FLOP/us
  const double kPerSplit = std::ceil(static_cast<double>(g.k) / static_cast<double>(t.splitK));
  const double tileUs = 2.0 * static_cast<double>(t.rows) * static_cast<double>(t.cols) *
                        kPerSplit / std::max(perSm, 1e-9);
  const double compute = static_cast<double>(waves(t, sms)) * (tileUs + gpu.gemmWaveUs);
  const double mn = static_cast<double>(g.m) * static_cast<double>(g.n);
  double bytes = static_cast<double>(g.batch) * dtypeBytes(g.dtype) *
                 (static_cast<double>(g.m) * g.k + static_cast<double>(g.k) * g.n + mn);
  if (t.splitK > 1) bytes += static_cast<double>(g.batch) * mn * 4.0 * 2.0 * t.splitK;
  return std::max(compute, bytes / memBytesPerUs);
}

// The tiling the GEMM runs with on `sms` SMs and its kernel time: of the preset's tile shapes,
// each with and without its split of K, the one that takes least time (the largest tile, split,
// on a tie).
struct Choice {
  Tiling tiling;
  double us = 0;
};
Choice chooseTiling(const GpuModel& gpu, const GemmShape& g, int sms, double memBytesPerUs) {
  Choice best;
  bool any = false;
  auto consider = [&](const Tiling& t) {
    const double us = tilingUs(gpu, g, t, sms, memBytesPerUs);
    if (!any || us < best.us) best = {t, us};
    any = true;
  };
  auto shape = [&](int tm, int tn) {
    Tiling t = tiling(static_cast<uint64_t>(tm), static_cast<uint64_t>(tn), g, sms);
    consider(t);
    if (t.splitK > 1) {
      t.splitK = 1;
      consider(t);
    }
  };
  shape(gpu.tileM, gpu.tileN);
  for (const auto& more : gpu.moreTiles) shape(more[0], more[1]);
  return best;
}
}  // namespace

uint64_t gemmTiles(const GpuModel& gpu, const GemmShape& g) {
  return chooseTiling(gpu, g, gpu.sms, memRate(gpu, {})).tiling.tiles;
}

uint64_t gemmWaves(const GpuModel& gpu, const GemmShape& g, int sms) {
  return waves(chooseTiling(gpu, g, sms, memRate(gpu, {})).tiling, sms);
}

double gemmUs(const GpuModel& gpu, const GemmShape& g, const Interference& with) {
  if (g.m == 0 || g.n == 0 || g.k == 0 || g.batch == 0) return 0;
  const int sms = smsLeft(gpu, with);
  return chooseTiling(gpu, g, sms, memRate(gpu, with)).us + gpu.gemmFixedUs + gpu.launchUs;
}

Result checkShareOfPeak(double value, const char* what) {
  if (value > 0 && value <= 1) return tsrSuccess;
  return TSR_FAIL(tsrInvalidArgument,
                  "%s efficiency of %g is not a share of the peak (above 0, at most 1)", what,
                  value);
}

Result gemmCalibrate(GpuModel* gpu, const GemmShape& measured, double efficiency) {
  TSR_CHECK(checkShareOfPeak(efficiency, "a GEMM"));
  if (measured.m == 0 || measured.n == 0 || measured.k == 0 || measured.batch == 0)
    return TSR_FAIL(tsrInvalidArgument, "a measured GEMM needs its M, N and K");
  // The measured kernel time; the model's (no launch gap) falls as the rate rises, so bisect.
  const double target = gemmFlops(measured) / (gpu->peakTflops(measured.dtype) * 1e6 * efficiency);
  auto kernelUs = [&](double rate) {
    GpuModel g = *gpu;
    g.gemmEfficiency = rate;
    return gemmUs(g, measured) - g.launchUs;
  };
  if (kernelUs(1.0) > target * (1 + 1e-9))
    return TSR_FAIL(
        tsrInvalidArgument,
        "a GEMM of %llu x %llu x %llu at %g%% of the peak takes %.2f us, less than the "
        "model's overheads and memory traffic allow at the full peak (%.2f us)",
        static_cast<unsigned long long>(measured.m), static_cast<unsigned long long>(measured.n),
        static_cast<unsigned long long>(measured.k), 100 * efficiency, target, kernelUs(1.0));
  double lo = 1e-6, hi = 1.0;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (kernelUs(mid) > target ? lo : hi) = mid;
  }
  gpu->gemmEfficiency = hi;
  return tsrSuccess;
}

double memoryUs(const GpuModel& gpu, double bytes, const Interference& with) {
  if (bytes <= 0) return 0;
  return bytes / memRate(gpu, with) + gpu.launchUs;
}

double attentionUs(const GpuModel& gpu, double flops, double bytes, DType t,
                   const Interference& with) {
  if (flops <= 0 && bytes <= 0) return 0;
  const double share = static_cast<double>(smsLeft(gpu, with)) / gpu.sms;
  const double rate = gpu.peakTflops(t) * 1e6 * gpu.attentionEfficiency * share;
  return std::max(flops / std::max(rate, 1e-9), bytes / memRate(gpu, with)) + gpu.launchUs;
}

}  // namespace tessera::workload
