// Host GEMM and conversions (host_gemm.hpp). The GEMM is a register-blocked kernel: a block of
// up to 4 rows x 8 columns of C stays in registers for the whole k loop, reading one row of B
// (two 4-float vectors) and one element of each A row per step. GCC vector extensions keep it
// portable (SSE2 on a baseline x86-64 build, NEON on aarch64) without -march flags.
#include "fused/host/host_gemm.hpp"

#include <cstring>
#include <type_traits>

#include "core/float_convert.hpp"

namespace tessera::fused {
namespace {

typedef float Vec4 __attribute__((vector_size(16)));

inline Vec4 load4(const float* p) {
  Vec4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, Vec4 v) { std::memcpy(p, &v, sizeof v); }

// R rows of C (R <= 4). Each element is sum_p a[r][p] * b[p][j] in increasing p, one float
// accumulator, no fused multiply-add in either path, so vector and scalar columns agree.
template <int R>
void rowBlock(const float* a, size_t lda, const float* b, size_t ldb, float* c, size_t ldc,
              uint32_t cols, uint64_t k) {
  uint32_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    Vec4 acc[R][2] = {};
    const float* bp = b + j;
    for (uint64_t p = 0; p < k; ++p, bp += ldb) {
      const Vec4 b0 = load4(bp), b1 = load4(bp + 4);
      for (int r = 0; r < R; ++r) {
        const float x = a[r * lda + p];
        const Vec4 av = {x, x, x, x};
        acc[r][0] += av * b0;
        acc[r][1] += av * b1;
      }
    }
    for (int r = 0; r < R; ++r) {
      store4(c + r * ldc + j, acc[r][0]);
      store4(c + r * ldc + j + 4, acc[r][1]);
    }
  }
  for (; j < cols; ++j) {
    float acc[R] = {};
    for (uint64_t p = 0; p < k; ++p) {
      const float y = b[p * ldb + j];
      for (int r = 0; r < R; ++r) acc[r] += a[r * lda + p] * y;
    }
    for (int r = 0; r < R; ++r) c[r * ldc + j] = acc[r];
  }
}

template <class T>
float loadAsFloat(const void* p, size_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<const float*>(p)[i];
  } else {
    return toFloat(static_cast<const T*>(p)[i]);
  }
}

template <class T>
void storeTyped(const float* src, const void* bias, void* dst, size_t count) {
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) {
    float v = src[i];
    if (bias) v += loadAsFloat<T>(bias, i);
    if constexpr (std::is_same_v<T, float>) {
      out[i] = v;
    } else {
      out[i] = T::fromFloat(v);
    }
  }
}

}  // namespace

void convertToFloat(tsrDataType_t type, const void* src, float* dst, size_t count) {
  switch (type) {
    case tsrFloat16:
      for (size_t i = 0; i < count; ++i) dst[i] = loadAsFloat<Float16>(src, i);
      return;
    case tsrBfloat16:
      for (size_t i = 0; i < count; ++i) dst[i] = loadAsFloat<BFloat16>(src, i);
      return;
    default: std::memcpy(dst, src, count * sizeof(float)); return;
  }
}

void storeFromFloat(tsrDataType_t type, const float* src, const void* bias, void* dst,
                    size_t count) {
  switch (type) {
    case tsrFloat16: storeTyped<Float16>(src, bias, dst, count); return;
    case tsrBfloat16: storeTyped<BFloat16>(src, bias, dst, count); return;
    default: storeTyped<float>(src, bias, dst, count); return;
  }
}

const float* floatView(tsrDataType_t type, const void* src, size_t count,
                       std::vector<float>* storage) {
  if (type == tsrFloat32) return static_cast<const float*>(src);
  if (storage->size() < count) storage->resize(count);
  convertToFloat(type, src, storage->data(), count);
  return storage->data();
}

void gemmTile(const float* a, size_t lda, const float* b, size_t ldb, float* c, size_t ldc,
              uint32_t rows, uint32_t cols, uint64_t k) {
  uint32_t i = 0;
  for (; i + 4 <= rows; i += 4) rowBlock<4>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, cols, k);
  switch (rows - i) {
    case 3: rowBlock<3>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, cols, k); break;
    case 2: rowBlock<2>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, cols, k); break;
    case 1: rowBlock<1>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, cols, k); break;
    default: break;
  }
}

}  // namespace tessera::fused
