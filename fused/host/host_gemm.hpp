// The host reference executor's arithmetic: conversions between the fused layer's element types
// (float32, float16, bfloat16) and float, and a tiled float GEMM. Accumulation is float, one
// accumulator per output element, summed over k in increasing order, so a result never depends
// on the tile shape or on which code path (vector body or scalar edge) computed it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::fused {

// dst[i] = float(src[i]) for i < count; `type` is float32, float16 or bfloat16 (exact).
void convertToFloat(tsrDataType_t type, const void* src, float* dst, size_t count);

// dst[i] = type(src[i] + (bias ? float(bias[i]) : 0)), rounded to nearest even; `type` and the
// bias's type are float32, float16 or bfloat16.
void storeFromFloat(tsrDataType_t type, const float* src, const void* bias, void* dst,
                    size_t count);

// A float view of `count` elements: `src` itself for float32, else a converted copy kept in
// `storage` (grown as needed, reused between calls).
const float* floatView(tsrDataType_t type, const void* src, size_t count,
                       std::vector<float>* storage);

// C[rows x cols] = A[rows x k] * B[k x cols], all float and row-major with the given leading
// dimensions (in elements). C is overwritten.
void gemmTile(const float* a, size_t lda, const float* b, size_t ldb, float* c, size_t ldc,
              uint32_t rows, uint32_t cols, uint64_t k);

}  // namespace tessera::fused
