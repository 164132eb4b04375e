// The fused GEMM kernel (kernels.hpp): a CuTe mainloop for sm_80 and later (mma.sync 16x8x16 with
// float accumulators, cp.async global->shared in a 3-stage pipeline, ldmatrix shared->registers)
// and tessera's epilogue, which is the point of the fused layer: each finished tile goes straight
// to where the collective needs it, addressed through the accumulators' coordinates.
//
// Operands (row-major, as the API takes them): A (M x K) is K-major; B (K x N) is N-major, so it
// is read with transposing ldmatrix. Global loads move 16 bytes, hence K and N multiples of 8 and
// A, B 16-byte aligned (device_executor.cpp refuses anything else with a sentence). Edge tiles:
// rows past the tile's rows, columns past its columns and k past K are zero-filled in shared
// memory (cp.async with source size 0), and the epilogue stores only the tile's valid elements.
//
// A persistent grid walks the scheduler's order (t = blockIdx.x, += gridDim.x). Per tile, before
// the mainloop, one thread waits for what the tile needs (device_sync.cuh has the deadline):
//   ReduceScatter / AllReduce: done[owner] >= call: the owner no longer reads the previous call's
//     partials; then the epilogue stores float partials into the owner's slot [rank] (or adds
//     them to slot 0 in atomic mode) and signals the owner's tile counter of the tile's
//     communication tile.
//   AllGather: for a remote segment, gatherFlag(segment, chunk) > consumed: the chunk of A rows
//     arrived in this rank's gather region; the own segment is read from the user's A. The
//     epilogue adds the bias and stores C in the output type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

// cute/tensor.hpp first: the atom headers rely on what it declares.
#include <cute/tensor.hpp>
// (the blank line keeps clang-format from sorting it after the atoms)

#include <cute/atom/copy_atom.hpp>
#include <cute/atom/mma_atom.hpp>

#include "core/build_config.hpp"
#include "core/cuda/cuda_check.hpp"
#include "fused/device/device_sync.cuh"
#include "fused/device/gemm_epilogue.cuh"
#include "fused/device/kernels.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

constexpr int kTileM = static_cast<int>(kDeviceTileM);
constexpr int kTileN = static_cast<int>(kDeviceTileN);
constexpr int kTileK = 32;
constexpr int kStages = 3;
constexpr int kThreads = static_cast<int>(kGemmThreads);

template <class T>
struct MmaOp;
template <>
struct MmaOp<cute::bfloat16_t> {
  using Op = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct MmaOp<cute::half_t> {
  using Op = cute::SM80_16x8x16_F32F16F16F32_TN;
};

template <class T>
struct GemmTraits {
  // 2 x 2 warps; the 32 x 32 x 16 permutation gives each warp two atoms along N, which the x4
  // ldmatrix of B needs.
  using TiledMma =
      decltype(cute::make_tiled_mma(cute::MMA_Atom<typename MmaOp<T>::Op>{},
                                    cute::Layout<cute::Shape<cute::_2, cute::_2, cute::_1>>{},
                                    cute::Tile<cute::_32, cute::_32, cute::_16>{}));
  // Swizzles keep 8-element (16-byte) runs contiguous, as cp.async and ldmatrix need, and spread
  // ldmatrix rows over the banks.
  using SmemLayoutA = decltype(cute::tile_to_shape(
      cute::composition(
          cute::Swizzle<2, 3, 3>{},
          cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>{}),
      cute::Shape<cute::Int<kTileM>, cute::Int<kTileK>, cute::Int<kStages>>{}));
  using SmemLayoutB = decltype(cute::tile_to_shape(
      cute::composition(
          cute::Swizzle<3, 3, 3>{},
          cute::Layout<cute::Shape<cute::_64, cute::_8>, cute::Stride<cute::_1, cute::_64>>{}),
      cute::Shape<cute::Int<kTileN>, cute::Int<kTileK>, cute::Int<kStages>>{}));
  using LoadA = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, T>;
  using LoadB = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, T>;
  static constexpr int kSmemA = cute::cosize(SmemLayoutA{});
  static_assert(cute::size(TiledMma{}) == kThreads, "one thread per MMA thread");
};
// loadStage below: each thread copies 4 runs of 8 elements of A and 4 of B per stage.
static_assert(kTileM * kTileK == 4 * 8 * kThreads && kTileN * kTileK == 4 * 8 * kThreads);
static_assert(kTileK == 32 && kTileN == 128, "loadStage's run indexing");

// The same for both instantiations (16-bit inputs): A's stages, then B's.
constexpr int kGemmSmemBytes =
    static_cast<int>((cute::cosize(GemmTraits<cute::half_t>::SmemLayoutA{}) +
                      cute::cosize(GemmTraits<cute::half_t>::SmemLayoutB{})) *
                     sizeof(cute::half_t));

__device__ inline void copy16(const void* src, void* dst, bool valid) {
  cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>::copy(
      *static_cast<const cute::uint128_t*>(src), *static_cast<cute::uint128_t*>(dst), valid);
}

using tile_epilogue::storeC;
using tile_epilogue::tileReady;

// ReduceScatter / AllReduce: the float partial into the owner's slot, tile-contiguous.
template <class Acc, class Coords>
__device__ void storePartial(const FusedParams& p, const TileCoord& tc, const Acc& acc,
                             const Coords& coords) {
  float* dst = tile_epilogue::partialDestination(p, tc);
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc); ++i) {
    const uint32_t r = cute::get<0>(coords(i)), col = cute::get<1>(coords(i));
    if (r >= tc.rows || col >= tc.cols) continue;
    float* at = dst + r * static_cast<uint32_t>(kTileN) + col;
    if (p.atomic != 0)
      atomicAdd_system(at, acc(i));
    else
      *at = acc(i);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) fusedGemmKernel(FusedParams p) {
  using namespace cute;
  using Tr = GemmTraits<T>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int tileOk;

  T* smemA = reinterpret_cast<T*>(smem);
  T* smemB = smemA + Tr::kSmemA;
  const typename Tr::SmemLayoutA layoutA{};
  const typename Tr::SmemLayoutB layoutB{};
  Tensor sA = make_tensor(make_smem_ptr(smemA), layoutA);  // (M, K, stage)
  Tensor sB = make_tensor(make_smem_ptr(smemB), layoutB);  // (N, K, stage)

  typename Tr::TiledMma mma;
  auto thr = mma.get_slice(threadIdx.x);
  Tensor tCrA = thr.partition_fragment_A(sA(_, _, 0));  // (MMA, MMA_M, MMA_K)
  Tensor tCrB = thr.partition_fragment_B(sB(_, _, 0));  // (MMA, MMA_N, MMA_K)
  Tensor acc = partition_fragment_C(mma, Shape<Int<kTileM>, Int<kTileN>>{});
  Tensor coords = thr.partition_C(make_identity_tensor(Shape<Int<kTileM>, Int<kTileN>>{}));

  auto loadA = make_tiled_copy_A(typename Tr::LoadA{}, mma);
  auto loadAThr = loadA.get_slice(threadIdx.x);
  Tensor tXsA = loadAThr.partition_S(sA);  // (CPY, CPY_M, CPY_K, stage)
  Tensor tXrA = loadAThr.retile_D(tCrA);
  auto loadB = make_tiled_copy_B(typename Tr::LoadB{}, mma);
  auto loadBThr = loadB.get_slice(threadIdx.x);
  Tensor tXsB = loadBThr.partition_S(sB);
  Tensor tXrB = loadBThr.retile_D(tCrB);

  const uint64_t call = p.control->callIndex;
  const uint64_t k = p.k, n = p.sched.cols;
  const int kTiles = static_cast<int>((k + kTileK - 1) / kTileK);
  const uint64_t numTiles = p.sched.numTiles();
  const int tid = static_cast<int>(threadIdx.x);
  const T* aUser = static_cast<const T*>(p.a);
  const T* bUser = static_cast<const T*>(p.b);
  const bool gather = p.sched.op == FusedOp::kAllGatherGemm;

  for (uint64_t t = blockIdx.x; t < numTiles; t += gridDim.x) {
    const TileCoord tc = p.sched.tile(t);
    if (tid == 0) tileOk = tileReady(p, tc, call) ? 1 : 0;
    __syncthreads();
    const bool ok = tileOk != 0;
    __syncthreads();    // thread 0 rewrites tileOk for the next tile only after everyone read it
    if (!ok) continue;  // the owner / reader times out too and reports it

    // Row 0 of the tile's A rows: the user's A, or (AllGather, remote segment) the gather region.
    const T* aTile;
    if (!gather)
      aTile = aUser + tc.row0 * k;
    else if (tc.segment == p.rank)
      aTile = aUser + (tc.row0 - static_cast<uint64_t>(p.rank) * p.sched.segmentRows) * k;
    else
      aTile = reinterpret_cast<const T*>(p.ws + p.layout.gatherRow(tc.row0));
    const T* bTile = bUser + tc.col0;

    // 128 rows x 4 runs of A and 32 k-rows x 16 runs of B per stage: 4 + 4 runs per thread.
    auto loadStage = [&](int kt, int stage) {
      const uint64_t k0 = static_cast<uint64_t>(kt) * kTileK;
      CUTE_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int id = tid + i * kThreads;
        const int m = id >> 2, kk = (id & 3) * 8;
        const bool valid = static_cast<uint32_t>(m) < tc.rows && k0 + kk < k;
        const T* src = valid ? aTile + static_cast<uint64_t>(m) * k + k0 + kk : aTile;
        copy16(src, smemA + layoutA(m, kk, stage), valid);
      }
      CUTE_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int id = tid + i * kThreads;
        const int kr = id >> 4, nn = (id & 15) * 8;
        const bool valid = k0 + kr < k && static_cast<uint32_t>(nn) < tc.cols;
        const T* src = valid ? bTile + (k0 + kr) * n + nn : bTile;
        copy16(src, smemB + layoutB(nn, kr, stage), valid);
      }
    };

    clear(acc);
    CUTE_UNROLL
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < kTiles) loadStage(s, s);
      cp_async_fence();
    }
    for (int kt = 0; kt < kTiles; ++kt) {
      // Stage kt has landed; every thread is done with the stage the next load overwrites.
      cp_async_wait<kStages - 2>();
      __syncthreads();
      const int next = kt + kStages - 1;
      if (next < kTiles) loadStage(next, next % kStages);
      cp_async_fence();
      const int stage = kt % kStages;
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        copy(loadA, tXsA(_, _, kb, stage), tXrA(_, _, kb));
        copy(loadB, tXsB(_, _, kb, stage), tXrB(_, _, kb));
        gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), acc);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the next tile's loads overwrite the stages

    if (gather) {
      switch (p.outType) {
        case kOutFloat16: storeC<__half>(p, tc, acc, coords); break;
        case kOutBfloat16: storeC<__nv_bfloat16>(p, tc, acc, coords); break;
        default: storeC<float>(p, tc, acc, coords); break;
      }
    } else {
      storePartial(p, tc, acc, coords);
      __syncthreads();
      if (tid == 0)
        signalAfterStores(wordAt(p.peerWs[tc.segment], p.layout.tileCounter(tc.commTile)));
    }
  }
}

struct KernelEntry {
  const char* name;
  const void* fn;
};

const KernelEntry kGemmKernels[] = {
    {"gemm bf16", reinterpret_cast<const void*>(&fusedGemmKernel<cute::bfloat16_t>)},
    {"gemm fp16", reinterpret_cast<const void*>(&fusedGemmKernel<cute::half_t>)},
};

}  // namespace

Result prepareGemmKernels(int* ctasPerSm) {
  int fewest = 0;
  for (const KernelEntry& k : kGemmKernels) {
    cudaError_t e =
        cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kGemmSmemBytes);
    int blocks = 0;
    if (e == cudaSuccess)
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, kThreads, kGemmSmemBytes);
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError,
                      "loading the fused %s kernel (built for sm %s) failed: %s", k.name,
                      TESSERA_CUDA_ARCHS, cudaErrorText(e).c_str());
    if (blocks < 1)
      return TSR_FAIL(tsrInternalError,
                      "the fused %s kernel does not fit on an SM (%d bytes of shared memory, %d "
                      "threads)",
                      k.name, kGemmSmemBytes, kThreads);
    fewest = fewest == 0 || blocks < fewest ? blocks : fewest;
  }
  *ctasPerSm = fewest;
  return tsrSuccess;
}

Result launchFusedGemm(const FusedParams& p, bool bf16, uint32_t ctas, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (bf16)
    fusedGemmKernel<cute::bfloat16_t><<<ctas, kThreads, kGemmSmemBytes, s>>>(p);
  else
    fusedGemmKernel<cute::half_t><<<ctas, kThreads, kGemmSmemBytes, s>>>(p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "launching the fused GEMM kernel (%u CTAs x %d threads, %d bytes of shared "
                    "memory) failed: %s",
                    ctas, kThreads, kGemmSmemBytes, cudaErrorText(e).c_str());
  return tsrSuccess;
}

}  // namespace tessera::fused
