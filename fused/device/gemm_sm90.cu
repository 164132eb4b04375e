// The fused GEMM for compute capability 9.0 (kernels.hpp), built for sm_90a only: CUTLASS's SM90
// collective mainloop (TMA loads into a multi-stage shared-memory pipeline, wgmma with float
// accumulators) driven by our persistent kernel, which walks the tile scheduler's order and ends
// each tile with the same epilogue and signalling as gemm_sm80.cu (whose file comment is the
// contract: waits, partial slots, counters, AllGather's two sources of A, edge tiles).
//
// Warp specialization, as CUTLASS's cooperative kernel: warp group 0 is the producer (one warp
// issues the TMA loads; the other three idle), warp groups 1 and 2 are the consumers, each
// computing 64 rows of the 128 x 128 tile, then storing their accumulators.
//
// Per tile, one producer lane first waits for what the tile needs (device_sync.cuh, as
// gemm_sm80.cu's tileReady) and hands the verdict to the consumers through a small mbarrier
// pipeline (PipelineAsync) before it issues the tile's loads; when the wait failed, neither side
// touches the tile, so the load and compute pipelines stay in step. For AllGather, a remote
// segment's A rows are in the gather region, written by peers (SM stores or the copy engine) and
// published by a flag the lane acquires; TMA reads through the async proxy, so the acquire is
// followed by fence.proxy.async.global (PTX memory model: ordering across proxies needs a proxy
// fence) before any load of those rows is issued.
//
// TMA descriptors (host-built, passed as __grid_constant__) carry each tensor's real extents, so
// boxes past M, N or K are zero-filled. A's rows are addressed by absolute row (domain_offset of
// the TMA coordinate tensor), because a segment need not start on a multiple of 128 rows; rows of
// the next segment that a box picks up only feed accumulator rows the epilogue never stores.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cuda/ptx>

// cute/tensor.hpp first: the atom headers rely on what it declares.
#include <cute/tensor.hpp>
// (the blank line keeps clang-format from sorting it after the others)

#include <cutlass/arch/barrier.h>

#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/pipeline/pipeline.hpp>

#include "core/build_config.hpp"
#include "core/cuda/cuda_check.hpp"
#include "fused/device/device_sync.cuh"
#include "fused/device/gemm_epilogue.cuh"
#include "fused/device/kernels.hpp"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_sm90.cu uses wgmma and must be compiled for sm_90a only (fused/device/sources.cmake)"
#endif

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
static_assert(kDeviceTileM == 128 && kDeviceTileN == 128, "TileShape is the device tile");

constexpr int kThreads = 384;  // producer warp group + two consumer warp groups
constexpr int kConsumerThreads = 256;
constexpr int kInfoStages = 4;    // tile verdicts the producer may publish ahead
constexpr int kSmemAlign = 1024;  // 128-byte swizzled TMA/wgmma tiles need 1024-byte alignment
constexpr int kMaxSmem = 232448;  // sm_90's opt-in shared memory per block
constexpr unsigned kEpilogueBarrier =
    static_cast<unsigned>(cutlass::arch::ReservedNamedBarriers::FirstUserBarrier);
using InfoPipeline = cutlass::PipelineAsync<kInfoStages>;

// What shares shared memory with the mainloop's stages: the verdict pipeline and its slots.
struct InfoStorage {
  typename InfoPipeline::SharedStorage pipeline;
  uint32_t tileOk[kInfoStages];
};

template <class T>
struct Sm90Traits {
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, 8, T,
      cutlass::layout::RowMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(InfoStorage)) +
                                                        kSmemAlign>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using TiledMma = typename Mainloop::TiledMma;
  using Pipeline = typename Mainloop::MainloopPipeline;
  using PipelineState = typename Mainloop::PipelineState;
  using Params = typename Mainloop::Params;

  struct Storage {
    typename Mainloop::TensorStorage tensors;  // first: at the 1024-byte aligned base
    typename Mainloop::PipelineStorage pipeline;
    InfoStorage info;
  };
  static constexpr int kSmemBytes = static_cast<int>(sizeof(Storage)) + kSmemAlign;
  static_assert(kSmemBytes <= kMaxSmem, "the stages do not fit in an SM's shared memory");
  static_assert(cute::size(TiledMma{}) == kConsumerThreads, "two consumer warp groups");
};

// The kernel's one parameter (__grid_constant__: the TMA descriptors must stay in parameter
// space). `mainA`: RS/AR: A (M x K); AllGather: this rank's shard. `gatherA`: AllGather: the gather
// region of this rank's workspace (M x K); otherwise a copy of mainA. Both carry the same B.
template <class T>
struct Sm90Args {
  FusedParams p;
  typename Sm90Traits<T>::Params mainA;
  typename Sm90Traits<T>::Params gatherA;
  int32_t rowsMain;  // extents the descriptors were made with
  int32_t rowsGather;
  int32_t n;
  int32_t k;
};

using tile_epilogue::storeC;
using tile_epilogue::tileReady;

// ReduceScatter / AllReduce: the float partial into the owner's slot (leading dimension 128).
// wgmma's accumulator layout gives each thread pairs (i, i + 1) at columns (2j, 2j + 1) of one
// row (the kernel asserts the pair mode; the even first column is PTX's fragment layout), and
// tc.cols is a multiple of 8, so a pair is valid or invalid as a whole: one float2 store.
template <class Acc, class Coords>
__device__ void storePartial(const FusedParams& p, const TileCoord& tc, const Acc& acc,
                             const Coords& coords) {
  float* dst = tile_epilogue::partialDestination(p, tc);
  static_assert(cute::size(Acc{}) % 2 == 0);
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc); i += 2) {
    const uint32_t r = cute::get<0>(coords(i)), col = cute::get<1>(coords(i));
    if (r >= tc.rows || col >= tc.cols) continue;
    float* at = dst + r * kDeviceTileN + col;
    if (p.atomic != 0) {
      atomicAdd_system(at, acc(i));
      atomicAdd_system(at + 1, acc(i + 1));
    } else {
      __stcg(reinterpret_cast<float2*>(at), make_float2(acc(i), acc(i + 1)));
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    fusedGemmSm90Kernel(const __grid_constant__ Sm90Args<T> args) {
  using namespace cute;
  using Tr = Sm90Traits<T>;
  using Mainloop = typename Tr::Mainloop;
  using Pipeline = typename Tr::Pipeline;
  using PipelineState = typename Tr::PipelineState;
  using Storage = typename Tr::Storage;
  using X = Underscore;

  extern __shared__ char smemRaw[];
  const uint32_t base = cast_smem_ptr_to_uint(smemRaw);
  Storage& ss =
      *reinterpret_cast<Storage*>(smemRaw + ((kSmemAlign - base % kSmemAlign) % kSmemAlign));

  const FusedParams& p = args.p;
  const int warpGroup = static_cast<int>(threadIdx.x) / 128;
  const int warpInGroup = (static_cast<int>(threadIdx.x) / 32) % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const bool producer = warpGroup == 0 && warpInGroup == 0;

  typename Pipeline::Params pp;
  pp.role = producer        ? Pipeline::ThreadCategory::Producer
            : warpGroup > 0 ? Pipeline::ThreadCategory::Consumer
                            : Pipeline::ThreadCategory::NonParticipant;
  pp.is_leader = threadIdx.x == 0;  // the lane elect_one_sync picks in the producer warp
  pp.num_consumers = kConsumerThreads;
  pp.transaction_bytes = args.mainA.tma_transaction_bytes;  // same boxes in both descriptors
  Pipeline pipeline(ss.pipeline, pp, ClusterShape{});

  typename InfoPipeline::Params ip;
  ip.role = producer        ? InfoPipeline::ThreadCategory::Producer
            : warpGroup > 0 ? InfoPipeline::ThreadCategory::Consumer
                            : InfoPipeline::ThreadCategory::NonParticipant;
  ip.producer_arv_count = 1;  // lane 0 of the producer warp
  ip.consumer_arv_count = kConsumerThreads;
  InfoPipeline info(ss.info.pipeline, ip);
  // Volatile: the mbarrier operations around these accesses are asm without a memory clobber.
  volatile uint32_t* tileOk = ss.info.tileOk;
  __syncthreads();  // barrier initialization is visible to every thread

  const bool gather = p.sched.op == FusedOp::kAllGatherGemm;
  const uint64_t numTiles = p.sched.numTiles();
  const int kTiles = (args.k + 63) / 64;
  Mainloop mainloop;

  if (producer) {
    if (lane == 0) {
      Mainloop::prefetch_tma_descriptors(args.mainA);
      Mainloop::prefetch_tma_descriptors(args.gatherA);
    }
    const uint64_t call = p.control->callIndex;
    PipelineState write = cutlass::make_producer_start_state<Pipeline>();
    auto infoWrite = cutlass::make_producer_start_state<InfoPipeline>();
    for (uint64_t t = blockIdx.x; t < numTiles; t += gridDim.x) {
      const TileCoord tc = p.sched.tile(t);
      uint32_t ok = 0;
      if (lane == 0) {
        ok = tileReady(p, tc, call) ? 1u : 0u;
        info.producer_acquire(infoWrite);
        tileOk[infoWrite.index()] = ok;
        info.producer_commit(infoWrite);
      }
      ++infoWrite;
      ok = __shfl_sync(0xffffffffu, ok, 0);
      if (ok == 0) continue;  // the owner / reader times out too and reports it

      const bool remote = gather && tc.segment != p.rank;
      if (remote) {
        // Lane 0 acquired the chunk's flag; whichever lane issues the loads orders them after it.
        __syncwarp();
        cuda::ptx::fence_proxy_async(cuda::ptx::space_global);
      }
      const typename Tr::Params& mp = remote ? args.gatherA : args.mainA;
      const int32_t rows = remote ? args.rowsGather : args.rowsMain;
      const uint64_t row0 = gather && !remote
                                ? tc.row0 - static_cast<uint64_t>(p.rank) * p.sched.segmentRows
                                : tc.row0;
      Tensor mA = mp.tma_load_a.get_tma_tensor(make_shape(rows, args.k, 1));
      Tensor gA = local_tile(domain_offset(make_coord(static_cast<int32_t>(row0), 0, 0), mA),
                             TileShape{}, make_coord(_, _, _), Step<_1, X, _1>{});
      Tensor mB = mp.tma_load_b.get_tma_tensor(make_shape(args.n, args.k, 1));
      Tensor gB = local_tile(mB, TileShape{}, make_coord(_, _, _), Step<X, _1, _1>{});
      mainloop.load(mp, pipeline, write, make_tuple(gA, gB),
                    make_coord(0, static_cast<int>(tc.tileCol), _, 0),
                    make_coord_iterator(shape<3>(gA)), kTiles, lane, 0u, ss.tensors);
      write.advance(static_cast<uint32_t>(kTiles));
    }
    mainloop.load_tail(pipeline, write);
  } else if (warpGroup > 0) {
    const int mmaThread = static_cast<int>(threadIdx.x) - 128;
    typename Tr::TiledMma mma;
    Tensor coords = mma.get_slice(mmaThread).partition_C(make_identity_tensor(Shape<_128, _128>{}));
    // storePartial's pairs: values 2j and 2j + 1 of a thread are neighbours along a row.
    static_assert(decltype(size<0, 0>(coords))::value == 2 &&
                  cute::is_same_v<decltype(stride<0, 0>(coords)), ScaledBasis<_1, 1>>);
    PipelineState read;
    typename InfoPipeline::PipelineState infoRead;
    for (uint64_t t = blockIdx.x; t < numTiles; t += gridDim.x) {
      const TileCoord tc = p.sched.tile(t);
      info.consumer_wait(infoRead);
      const uint32_t ok = tileOk[infoRead.index()];
      info.consumer_release(infoRead);
      ++infoRead;
      if (ok == 0) continue;

      Tensor acc = partition_fragment_C(mma, Shape<_128, _128>{});
      static_assert(decltype(shape(acc) == shape(coords))::value, "one coordinate per accumulator");
      mainloop.mma(pipeline, read, acc, kTiles, mmaThread, ss.tensors, args.mainA);
      mainloop.mma_tail(pipeline, read, kTiles);
      read.advance(static_cast<uint32_t>(kTiles));

      if (gather) {
        switch (p.outType) {
          case kOutFloat16: storeC<__half>(p, tc, acc, coords); break;
          case kOutBfloat16: storeC<__nv_bfloat16>(p, tc, acc, coords); break;
          default: storeC<float>(p, tc, acc, coords); break;
        }
      } else {
        storePartial(p, tc, acc, coords);
        // Every consumer's stores, then one signal (a compiler-known barrier, id past CUTLASS's).
        __barrier_sync_count(kEpilogueBarrier, kConsumerThreads);
        if (mmaThread == 0)
          signalAfterStores(wordAt(p.peerWs[tc.segment], p.layout.tileCounter(tc.commTile)));
      }
    }
  }
}

struct KernelEntry {
  const char* name;
  const void* fn;
  int smem;
};

const KernelEntry kGemmKernels[] = {
    {"sm90 gemm bf16", reinterpret_cast<const void*>(&fusedGemmSm90Kernel<cute::bfloat16_t>),
     Sm90Traits<cute::bfloat16_t>::kSmemBytes},
    {"sm90 gemm fp16", reinterpret_cast<const void*>(&fusedGemmSm90Kernel<cute::half_t>),
     Sm90Traits<cute::half_t>::kSmemBytes},
};

// A descriptor whose encoding failed stays all zero (CUTLASS reports the failure only on stderr).
bool encoded(const cute::TmaDescriptor* d) {
  const auto* w = reinterpret_cast<const uint64_t*>(d);
  for (size_t i = 0; i < sizeof(cute::TmaDescriptor) / 8; ++i)
    if (w[i] != 0) return true;
  return false;
}

// Host: the descriptors of one A and B (extents rows x k and k x n).
template <class T>
typename Sm90Traits<T>::Params makeParams(const void* a, int32_t rows, const void* b, int32_t n,
                                          int32_t k) {
  using Mainloop = typename Sm90Traits<T>::Mainloop;
  typename Mainloop::Arguments args{
      static_cast<const T*>(a),
      typename Mainloop::StrideA{int64_t{k}, cute::_1{}, int64_t{rows} * k},
      static_cast<const T*>(b), typename Mainloop::StrideB{cute::_1{}, int64_t{n}, int64_t{n} * k}};
  return Mainloop::to_underlying_arguments(cute::make_shape(rows, n, k, 1), args, nullptr);
}

template <class T>
Result launchTyped(const FusedParams& p, uint32_t ctas, cudaStream_t stream) {
  Sm90Args<T> args{};
  args.p = p;
  const bool gather = p.sched.op == FusedOp::kAllGatherGemm;
  const uint64_t m = p.sched.segmentRows * p.sched.nranks;
  args.rowsMain = static_cast<int32_t>(gather ? p.sched.segmentRows : m);
  args.rowsGather = static_cast<int32_t>(m);
  args.n = static_cast<int32_t>(p.sched.cols);
  args.k = static_cast<int32_t>(p.k);
  args.mainA = makeParams<T>(p.a, args.rowsMain, p.b, args.n, args.k);
  args.gatherA = gather
                     ? makeParams<T>(p.ws + p.layout.gather, args.rowsGather, p.b, args.n, args.k)
                     : args.mainA;
  for (const auto* d :
       {args.mainA.tma_load_a.get_tma_descriptor(), args.mainA.tma_load_b.get_tma_descriptor(),
        args.gatherA.tma_load_a.get_tma_descriptor()})
    if (!encoded(d))
      return TSR_FAIL(tsrUnhandledCudaError,
                      "the fused sm90 GEMM could not make its TMA descriptors "
                      "(cuTensorMapEncodeTiled failed; M=%llu N=%d K=%d)",
                      static_cast<unsigned long long>(m), args.n, args.k);
  fusedGemmSm90Kernel<T><<<ctas, kThreads, Sm90Traits<T>::kSmemBytes, stream>>>(args);
  return tsrSuccess;
}

}  // namespace

bool gemmSm90Fits(const FusedParams& p) {
  // TMA coordinates and extents are 32-bit signed here, and the kernel rounds K and a tile's rows
  // up by up to a tile (k + 63, row0 + 127): the sm80 path takes anything closer to 2^31.
  constexpr uint64_t kLimit = (uint64_t{1} << 31) - 128;
  return p.sched.segmentRows * p.sched.nranks < kLimit && p.sched.cols < kLimit && p.k < kLimit;
}

Result prepareGemmKernelsSm90(int* ctasPerSm) {
  int fewest = 0;
  for (const KernelEntry& k : kGemmKernels) {
    cudaError_t e = cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem);
    int blocks = 0;
    if (e == cudaSuccess)
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, kThreads, k.smem);
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError,
                      "loading the fused %s kernel (built for sm_90a) failed: %s", k.name,
                      cudaErrorText(e).c_str());
    if (blocks < 1)
      return TSR_FAIL(tsrInternalError,
                      "the fused %s kernel does not fit on an SM (%d bytes of shared memory, %d "
                      "threads)",
                      k.name, k.smem, kThreads);
    fewest = fewest == 0 || blocks < fewest ? blocks : fewest;
  }
  *ctasPerSm = fewest;
  return tsrSuccess;
}

Result launchFusedGemmSm90(const FusedParams& p, bool bf16, uint32_t ctas, void* stream) {
  if (!gemmSm90Fits(p))
    return TSR_FAIL(
        tsrInternalError,
        "the fused sm90 GEMM got a shape past its 32-bit TMA coordinates (M=%llu N=%llu "
        "K=%llu); the executor should have run the sm80 GEMM",
        static_cast<unsigned long long>(p.sched.segmentRows * p.sched.nranks),
        static_cast<unsigned long long>(p.sched.cols), static_cast<unsigned long long>(p.k));
  auto s = static_cast<cudaStream_t>(stream);
  Result r =
      bf16 ? launchTyped<cute::bfloat16_t>(p, ctas, s) : launchTyped<cute::half_t>(p, ctas, s);
  if (r != tsrSuccess) return r;
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "launching the fused sm90 GEMM kernel (%u CTAs x %d threads, %d bytes of "
                    "shared memory) failed: %s",
                    ctas, kThreads, Sm90Traits<cute::half_t>::kSmemBytes, cudaErrorText(e).c_str());
  return tsrSuccess;
}

}  // namespace tessera::fused
