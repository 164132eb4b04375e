// What both fused GEMM kernels (gemm_sm80.cu, gemm_sm90.cu; included by them only, after
// cute/tensor.hpp) do around their mainloops the same way: the per-tile readiness wait and the
// AllGather epilogue's store of C in the output type. The partial stores differ (the accumulator
// layouts allow different vector widths) and stay in each kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cute/tensor.hpp>

#include "fused/device/device_sync.cuh"

namespace tessera::fused::tile_epilogue {

template <class Out>
__device__ inline Out fromFloat(float v);
template <>
__device__ inline float fromFloat<float>(float v) {
  return v;
}
template <>
__device__ inline __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
__device__ inline float toFloat(float v) { return v; }
__device__ inline float toFloat(__half v) { return __half2float(v); }
__device__ inline float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// One thread, before a tile's loads: whether its inputs and destination are ready.
//   ReduceScatter / AllReduce: done[owner] >= call (the owner no longer reads the previous call's
//     partials, so this call's may overwrite them).
//   AllGather, remote segment: the chunk's flag passed what this rank consumed (its A rows are in
//     the gather region); the own segment needs nothing.
__device__ inline bool tileReady(const FusedParams& p, const TileCoord& tc, uint64_t call) {
  if (p.sched.op == FusedOp::kAllGatherGemm) {
    if (tc.segment == p.rank) return true;
    const uint32_t chunk = tc.tileRow / p.sched.cfg.commM;
    const uint64_t consumed = *wordAt(p.ws, p.layout.gatherConsumedAt(tc.segment, chunk));
    return waitWord(p, wordAt(p.ws, p.layout.gatherFlag(tc.segment, chunk)), consumed + 1,
                    kKernelGemm, kWaitGatherFlag, static_cast<int32_t>(tc.segment), chunk, call);
  }
  return waitWord(p, wordAt(p.ws, p.layout.doneOf(tc.segment)), call, kKernelGemm, kWaitDone,
                  static_cast<int32_t>(tc.segment), tc.segment, call);
}

// ReduceScatter / AllReduce: where this rank's float partial of tile `tc` goes in the owner's
// workspace (slot [rank], or the shared slot 0 when accumulating atomically), tile-contiguous with
// leading dimension kDeviceTileN.
__device__ inline float* partialDestination(const FusedParams& p, const TileCoord& tc) {
  const uint64_t tileIndex = static_cast<uint64_t>(tc.tileRow) * p.sched.tilesN + tc.tileCol;
  return reinterpret_cast<float*>(p.peerWs[tc.segment] +
                                  p.layout.partialTile(p.atomic != 0 ? 0u : p.rank, tileIndex));
}

// AllGather: C (+ bias) in the output type, straight into the user's C, element by element (C and
// bias are only element-aligned). `coords(i)` is accumulator i's (row, column) in the tile.
template <class Out, class Acc, class Coords>
__device__ void storeC(const FusedParams& p, const TileCoord& tc, const Acc& acc,
                       const Coords& coords) {
  Out* c = static_cast<Out*>(p.c);
  const Out* bias = static_cast<const Out*>(p.bias);
  const uint64_t ldc = p.sched.cols;
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc); ++i) {
    const uint32_t r = cute::get<0>(coords(i)), col = cute::get<1>(coords(i));
    if (r >= tc.rows || col >= tc.cols) continue;
    float v = acc(i);
    if (bias != nullptr) v += toFloat(bias[tc.col0 + col]);
    c[(tc.row0 + r) * ldc + tc.col0 + col] = fromFloat<Out>(v);
  }
}

}  // namespace tessera::fused::tile_epilogue
