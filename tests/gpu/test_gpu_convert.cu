// The narrow-float conversions of core/float_convert.hpp run on the device and compared bit for
// bit with the same header on the host (every float16, bfloat16 and FP8 code decoded, a sweep of
// floats encoded), and, for non-NaN results, with CUDA's own conversions (__float2half_rn,
// __float2bfloat16_rn, __nv_cvt_float_to_fp8 with E4M3 saturating and E5M2 not). The reduction
// functors of core/reduce_op.hpp, which are built on them, are compared the same way.
//
// Without CUDA in the build this file compiles as C++ and its tests skip with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/datatype.hpp"
#include "core/float_convert.hpp"
#include "core/reduce_op.hpp"
#include "support/harness.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#endif

namespace tessera {
namespace {

#if defined(__CUDACC__)

#define CUDA_OK(expr)                                                                      \
  do {                                                                                     \
    cudaError_t cuda_ok_e_ = (expr);                                                       \
    ASSERT_EQ(cuda_ok_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(cuda_ok_e_); \
  } while (0)

constexpr uint32_t kCodes16 = 1u << 16;

struct Decoded {
  uint32_t f16, bf16, e4m3, e5m2;  // float bits; FP8 entries only for codes < 256
};

struct Encoded {
  uint16_t f16, bf16;
  uint8_t e4m3, e5m2;
  uint16_t cudaF16, cudaBf16;
  uint8_t cudaE4m3, cudaE5m2;
};

__global__ void decodeKernel(Decoded* out) {
  for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < kCodes16;
       c += gridDim.x * blockDim.x) {
    Decoded d;
    d.f16 = floatBits(decodeFloat16(static_cast<uint16_t>(c)));
    d.bf16 = floatBits(decodeBFloat16(static_cast<uint16_t>(c)));
    d.e4m3 = floatBits(decodeFloat8E4M3(static_cast<uint8_t>(c & 0xFFu)));
    d.e5m2 = floatBits(decodeFloat8E5M2(static_cast<uint8_t>(c & 0xFFu)));
    out[c] = d;
  }
}

__global__ void encodeKernel(const float* in, size_t n, Encoded* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = in[i];
    Encoded e;
    e.f16 = encodeFloat16(x);
    e.bf16 = encodeBFloat16(x);
    e.e4m3 = encodeFloat8E4M3(x);
    e.e5m2 = encodeFloat8E5M2(x);
    e.cudaF16 = __half_as_ushort(__float2half_rn(x));
    e.cudaBf16 = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    e.cudaE4m3 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    e.cudaE5m2 = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
    out[i] = e;
  }
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every decoded value of every format, the floats one ulp beside it, the midpoints between
// neighbours (ties) and their neighbours, and a sweep over the whole float bit space.
std::vector<float> sweepInputs() {
  std::vector<float> v;
  auto addAround = [&](float x) {
    v.push_back(x);
    v.push_back(std::nextafter(x, 0.0f));
    v.push_back(std::nextafter(x, HUGE_VALF));
  };
  for (uint32_t c = 0; c < kCodes16; ++c) {
    const float a = decodeFloat16(static_cast<uint16_t>(c));
    const float b = decodeFloat16(static_cast<uint16_t>(c + 1));
    const float g = decodeBFloat16(static_cast<uint16_t>(c));
    const float h = decodeBFloat16(static_cast<uint16_t>(c + 1));
    addAround(a);
    addAround(g);
    if (std::isfinite(a) && std::isfinite(b)) addAround(a + (b - a) / 2);
    if (std::isfinite(g) && std::isfinite(h)) addAround(g + (h - g) / 2);
  }
  for (uint32_t c = 0; c < 255; ++c) {
    for (float (*dec)(uint8_t) : {decodeFloat8E4M3, decodeFloat8E5M2}) {
      const float a = dec(static_cast<uint8_t>(c)), b = dec(static_cast<uint8_t>(c + 1));
      addAround(a);
      if (std::isfinite(a) && std::isfinite(b)) addAround(a + (b - a) / 2);
    }
  }
  for (float x : {464.0f, 480.0f, 61440.0f, 65520.0f, HUGE_VALF, -HUGE_VALF}) addAround(x);
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 1021)
    v.push_back(floatOf(static_cast<uint32_t>(u)));
  return v;
}

TEST(GpuConvert, DecodeEveryCodeMatchesHost) {
  TSR_SKIP_WITHOUT_GPU();
  Decoded* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, kCodes16 * sizeof(Decoded)));
  decodeKernel<<<64, 256>>>(dev);
  CUDA_OK(cudaGetLastError());
  std::vector<Decoded> got(kCodes16);
  CUDA_OK(cudaMemcpy(got.data(), dev, kCodes16 * sizeof(Decoded), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(dev));
  int bad = 0;
  for (uint32_t c = 0; c < kCodes16 && bad < 10; ++c) {
    const uint32_t want16 = floatBits(decodeFloat16(static_cast<uint16_t>(c)));
    const uint32_t wantBf = floatBits(decodeBFloat16(static_cast<uint16_t>(c)));
    const uint32_t want43 = floatBits(decodeFloat8E4M3(static_cast<uint8_t>(c & 0xFFu)));
    const uint32_t want52 = floatBits(decodeFloat8E5M2(static_cast<uint8_t>(c & 0xFFu)));
    const bool ok = got[c].f16 == want16 && got[c].bf16 == wantBf && got[c].e4m3 == want43 &&
                    got[c].e5m2 == want52;
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << "code 0x" << std::hex << c << ": device f16 " << got[c].f16 << " host "
                    << want16 << ", bf16 " << got[c].bf16 << "/" << wantBf << ", e4m3 "
                    << got[c].e4m3 << "/" << want43 << ", e5m2 " << got[c].e5m2 << "/" << want52;
  }
}

TEST(GpuConvert, EncodeSweepMatchesHostAndCuda) {
  TSR_SKIP_WITHOUT_GPU();
  const std::vector<float> in = sweepInputs();
  const size_t n = in.size();
  float* devIn = nullptr;
  Encoded* devOut = nullptr;
  CUDA_OK(cudaMalloc(&devIn, n * sizeof(float)));
  CUDA_OK(cudaMalloc(&devOut, n * sizeof(Encoded)));
  CUDA_OK(cudaMemcpy(devIn, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  encodeKernel<<<1024, 256>>>(devIn, n, devOut);
  CUDA_OK(cudaGetLastError());
  std::vector<Encoded> got(n);
  CUDA_OK(cudaMemcpy(got.data(), devOut, n * sizeof(Encoded), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(devIn));
  CUDA_OK(cudaFree(devOut));
  int badHost = 0, badCuda = 0;
  for (size_t i = 0; i < n && badHost < 10 && badCuda < 10; ++i) {
    const float x = in[i];
    const Encoded& e = got[i];
    const bool hostOk = e.f16 == encodeFloat16(x) && e.bf16 == encodeBFloat16(x) &&
                        e.e4m3 == encodeFloat8E4M3(x) && e.e5m2 == encodeFloat8E5M2(x);
    if (!hostOk) ++badHost;
    EXPECT_TRUE(hostOk) << "input bits 0x" << std::hex << floatBits(x) << ": device f16 " << e.f16
                        << " bf16 " << e.bf16 << " e4m3 " << +e.e4m3 << " e5m2 " << +e.e5m2;
    // NaN encodings differ between implementations; both must be NaN, which the host tests and
    // the decode comparison above cover. Everything else must agree bit for bit.
    if (std::isnan(x)) continue;
    const bool cudaOk =
        e.f16 == e.cudaF16 && e.bf16 == e.cudaBf16 && e.e4m3 == e.cudaE4m3 && e.e5m2 == e.cudaE5m2;
    if (!cudaOk) ++badCuda;
    EXPECT_TRUE(cudaOk) << "input " << x << " (bits 0x" << std::hex << floatBits(x)
                        << "): ours/CUDA f16 " << e.f16 << "/" << e.cudaF16 << " bf16 " << e.bf16
                        << "/" << e.cudaBf16 << " e4m3 " << +e.e4m3 << "/" << +e.cudaE4m3
                        << " e5m2 " << +e.e5m2 << "/" << +e.cudaE5m2;
  }
}

template <class T>
__global__ void reduceKernel(const T* a, const T* b, size_t n, T* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = reduceElem<RedSum>(a[i], b[i]);
    out[n + i] = reduceElem<RedProd>(a[i], b[i]);
    out[2 * n + i] = reduceElem<RedMin>(a[i], b[i]);
    out[3 * n + i] = reduceElem<RedMax>(a[i], b[i]);
  }
}

// Sum, prod, min and max of every pair (a[i], b[i]) on the device against reduceHost.
template <class T>
void checkReduceOnDevice(tsrDataType_t dtype, const std::vector<T>& a, const std::vector<T>& b) {
  const size_t n = a.size();
  T *devA = nullptr, *devB = nullptr, *devOut = nullptr;
  CUDA_OK(cudaMalloc(&devA, n * sizeof(T)));
  CUDA_OK(cudaMalloc(&devB, n * sizeof(T)));
  CUDA_OK(cudaMalloc(&devOut, 4 * n * sizeof(T)));
  CUDA_OK(cudaMemcpy(devA, a.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(devB, b.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  reduceKernel<<<256, 256>>>(devA, devB, n, devOut);
  CUDA_OK(cudaGetLastError());
  std::vector<T> got(4 * n);
  CUDA_OK(cudaMemcpy(got.data(), devOut, 4 * n * sizeof(T), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(devA));
  CUDA_OK(cudaFree(devB));
  CUDA_OK(cudaFree(devOut));
  const RedKind kinds[4] = {RedKind::kSum, RedKind::kProd, RedKind::kMin, RedKind::kMax};
  std::vector<T> want(n);
  for (int k = 0; k < 4; ++k) {
    RedOpDesc op;
    op.kind = kinds[k];
    ASSERT_EQ(reduceHost(op, dtype, a.data(), b.data(), want.data(), n), tsrSuccess);
    size_t mismatches = 0, first = n;
    for (size_t i = 0; i < n; ++i) {
      bool same = std::memcmp(&got[k * n + i], &want[i], sizeof(T)) == 0;
      if constexpr (std::is_same_v<T, float>) {
        // The GPU's arithmetic NaN is canonical, the CPU's keeps an operand's payload.
        same = same || (std::isnan(got[k * n + i]) && std::isnan(want[i]));
      }
      if (!same) {
        if (mismatches++ == 0) first = i;
      }
    }
    EXPECT_EQ(mismatches, 0u) << redKindName(kinds[k]) << " on " << dtypeName(dtype)
                              << ": first mismatch at element " << first;
  }
}

// Every pair of codes for FP8; a grid of pairs spread over all codes for the 16-bit formats.
template <class T>
void pairsOfCodes(std::vector<T>* a, std::vector<T>* b) {
  for (uint32_t i = 0; i < 256; ++i) {
    for (uint32_t j = 0; j < 256; ++j) {
      const uint32_t ci = sizeof(T) == 1 ? i : i * 257, cj = sizeof(T) == 1 ? j : j * 257;
      T x, y;
      std::memcpy(&x, &ci, sizeof(T));  // little-endian: the low bytes
      std::memcpy(&y, &cj, sizeof(T));
      a->push_back(x);
      b->push_back(y);
    }
  }
}

TEST(GpuConvert, ReduceFunctorsMatchHost) {
  TSR_SKIP_WITHOUT_GPU();
  {
    std::vector<Float16> a, b;
    pairsOfCodes(&a, &b);
    checkReduceOnDevice(tsrFloat16, a, b);
  }
  {
    std::vector<BFloat16> a, b;
    pairsOfCodes(&a, &b);
    checkReduceOnDevice(tsrBfloat16, a, b);
  }
  {
    std::vector<Float8E4M3> a, b;
    pairsOfCodes(&a, &b);
    checkReduceOnDevice(tsrFloat8e4m3, a, b);
  }
  {
    std::vector<Float8E5M2> a, b;
    pairsOfCodes(&a, &b);
    checkReduceOnDevice(tsrFloat8e5m2, a, b);
  }
  {
    // float32 from the same 16-bit grid, widened so that every exponent occurs.
    std::vector<float> a, b;
    for (uint32_t i = 0; i < 65536; ++i) {
      a.push_back(floatOf(i * 65537u));
      b.push_back(floatOf(~(i * 40503u)));
    }
    checkReduceOnDevice(tsrFloat32, a, b);
  }
}

#else  // no CUDA compiler in this build: the same tests, which skip with the reason

TEST(GpuConvert, DecodeEveryCodeMatchesHost) {
  TSR_SKIP_WITHOUT_GPU();
  FAIL() << "a GPU is usable but this build has no CUDA compiler";
}

TEST(GpuConvert, EncodeSweepMatchesHostAndCuda) {
  TSR_SKIP_WITHOUT_GPU();
  FAIL() << "a GPU is usable but this build has no CUDA compiler";
}

TEST(GpuConvert, ReduceFunctorsMatchHost) {
  TSR_SKIP_WITHOUT_GPU();
  FAIL() << "a GPU is usable but this build has no CUDA compiler";
}

#endif

}  // namespace
}  // namespace tessera
