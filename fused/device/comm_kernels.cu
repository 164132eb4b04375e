// The fused layer's small kernels (kernels.hpp): the owner's reduction, the AllReduce gather copy,
// the AllGather shard send, the copy-engine helpers and the end of a call. Plain CUDA (no CuTe), so
// this file compiles quickly.
//
// Grids are small and only thread 0 of a CTA spins: ranks sharing a GPU run these concurrently
// with each other's GEMMs, and a waiting CTA holds its SM slot (device_executor.cpp sizes the
// grids). Each unit of work (a communication tile, a chunk) belongs to one CTA, which advances the
// unit's consumed word itself after its wait passed; no other CTA reads that word in the call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.hpp"
#include "fused/device/device_sync.cuh"
#include "fused/device/kernels.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

__device__ inline float loadOut(const void* base, uint64_t i, uint32_t type) {
  switch (type) {
    case kOutFloat16: return __half2float(static_cast<const __half*>(base)[i]);
    case kOutBfloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

__device__ inline void storeOut(void* base, uint64_t i, uint32_t type, float v) {
  switch (type) {
    case kOutFloat16: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
    case kOutBfloat16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(base)[i] = v; break;
  }
}

__device__ inline uint32_t outBytes(uint32_t type) { return type == kOutFloat32 ? 4u : 2u; }

// The GEMM tiles of a communication tile: tile rows [r0, r1), tile columns [c0, c1).
struct Span {
  uint32_t r0, r1, c0, c1;
};
__device__ inline Span commTileSpan(const TileScheduler& s, uint32_t ct) {
  const uint32_t ctRow = ct / s.commTilesN, ctCol = ct % s.commTilesN;
  Span sp;
  sp.r0 = ctRow * s.cfg.commM;
  sp.r1 = sp.r0 + s.commTileRows(ctRow);
  sp.c0 = ctCol * s.cfg.commN;
  sp.c1 = sp.c0 + s.commTileCols(ctCol);
  return sp;
}

// Owner side of ReduceScatter / AllReduce. Per communication tile of this rank's segment: wait
// until all n producers delivered its tiles, sum the slots in rank order 0..n-1 (the atomic mode's
// slot 0 already holds the sum; it is zeroed for the next call), add the bias once, convert, and
// store: ReduceScatter into C (this rank's M/n x N rows); AllReduce into the gather region of every
// rank, then gatherFlag(rank, ct) += 1 at each.
__global__ void __launch_bounds__(kCommThreads) fusedReduceKernel(FusedParams p) {
  __shared__ int ok;
  const TileScheduler& s = p.sched;
  const uint64_t call = p.control->callIndex;
  const uint32_t n = p.nranks, tid = threadIdx.x;
  const bool allReduce = s.op == FusedOp::kGemmAllReduce;
  const uint32_t slots = p.atomic != 0 ? 1u : n;
  for (uint32_t ct = blockIdx.x; ct < s.commTilesPerSegment(); ct += gridDim.x) {
    uint64_t* consumed = wordAt(p.ws, p.layout.tileConsumedAt(ct));
    const uint64_t target = *consumed + static_cast<uint64_t>(n) * s.tilesInCommTile(ct);
    if (tid == 0) {
      bool good = waitWord(p, wordAt(p.ws, p.layout.tileCounter(ct)), target, kKernelReduce,
                           kWaitTileCounter, -1, ct, call);
      // AllReduce writes into every rank's gather region, which the rank reads until it ends the
      // previous call.
      for (uint32_t q = 0; allReduce && good && q < n; ++q)
        good = waitWord(p, wordAt(p.ws, p.layout.doneOf(q)), call, kKernelReduce, kWaitDone,
                        static_cast<int32_t>(q), q, call);
      ok = good ? 1 : 0;
    }
    __syncthreads();
    const bool good = ok != 0;
    const Span sp = commTileSpan(s, ct);
    for (uint32_t tr = sp.r0; good && tr < sp.r1; ++tr) {
      for (uint32_t tc = sp.c0; tc < sp.c1; ++tc) {
        const TileCoord t = s.coord(p.rank, tr, tc);
        const uint64_t tileIndex = static_cast<uint64_t>(tr) * s.tilesN + tc;
        const uint32_t elems = t.rows * t.cols;
        for (uint32_t e = tid; e < elems; e += blockDim.x) {
          const uint32_t r = e / t.cols, col = e % t.cols;
          const uint64_t at = static_cast<uint64_t>(r) * s.cfg.tileN + col;
          float sum = 0.0f;
          for (uint32_t slot = 0; slot < slots; ++slot)
            sum += reinterpret_cast<const float*>(p.ws + p.layout.partialTile(slot, tileIndex))[at];
          if (p.atomic != 0)
            reinterpret_cast<float*>(p.ws + p.layout.partialTile(0, tileIndex))[at] = 0.0f;
          if (p.bias != nullptr) sum += loadOut(p.bias, t.col0 + col, p.outType);
          if (!allReduce) {
            const uint64_t row = static_cast<uint64_t>(tr) * s.cfg.tileM + r;
            storeOut(p.c, row * s.cols + t.col0 + col, p.outType, sum);
            continue;
          }
          const uint64_t dst = p.layout.gatherTile(p.rank, tileIndex, s.tilesPerSegment);
          for (uint32_t j = 1; j <= n; ++j) {  // peers first, rotated, the own rank last
            char* ws = p.peerWs[(p.rank + j) % n];
            storeOut(ws + dst, at, p.outType, sum);
          }
        }
      }
    }
    __syncthreads();
    if (tid == 0 && good) {
      *consumed = target;
      if (allReduce) {
        __threadfence_system();
        for (uint32_t j = 1; j <= n; ++j)
          device::fetchAddRelease(
              wordAt(p.peerWs[(p.rank + j) % n], p.layout.gatherFlag(p.rank, ct)), 1);
      }
    }
  }
}

// AllReduce: per (segment, communication tile), wait for the owner's reduced tiles in this rank's
// gather region and copy them into C (M x N, row-major).
__global__ void __launch_bounds__(kCommThreads) fusedGatherCopyKernel(FusedParams p) {
  __shared__ int ok;
  const TileScheduler& s = p.sched;
  const uint64_t call = p.control->callIndex;
  const uint32_t n = p.nranks, tid = threadIdx.x, ctps = s.commTilesPerSegment();
  const uint32_t bytes = outBytes(p.outType);
  for (uint32_t u = blockIdx.x; u < n * ctps; u += gridDim.x) {
    // Segments in the order their owners finish them: the next rank's first.
    const uint32_t seg = (p.rank + 1 + u / ctps) % n, ct = u % ctps;
    uint64_t* consumed = wordAt(p.ws, p.layout.gatherConsumedAt(seg, ct));
    if (tid == 0)
      ok = waitWord(p, wordAt(p.ws, p.layout.gatherFlag(seg, ct)), *consumed + 1, kKernelGatherCopy,
                    kWaitGatherFlag, static_cast<int32_t>(seg), ct, call)
               ? 1
               : 0;
    __syncthreads();
    const bool good = ok != 0;
    const Span sp = commTileSpan(s, ct);
    for (uint32_t tr = sp.r0; good && tr < sp.r1; ++tr) {
      for (uint32_t tc = sp.c0; tc < sp.c1; ++tc) {
        const TileCoord t = s.coord(seg, tr, tc);
        const char* src = p.ws + p.layout.gatherTile(seg, static_cast<uint64_t>(tr) * s.tilesN + tc,
                                                     s.tilesPerSegment);
        const uint32_t elems = t.rows * t.cols;
        for (uint32_t e = tid; e < elems; e += blockDim.x) {
          const uint32_t r = e / t.cols, col = e % t.cols;
          const uint64_t from = (static_cast<uint64_t>(r) * s.cfg.tileN + col) * bytes;
          const uint64_t to = ((t.row0 + r) * s.cols + t.col0 + col) * bytes;
          char* dst = static_cast<char*>(p.c) + to;
          if (bytes == 4)
            *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src + from);
          else
            *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src + from);
        }
      }
    }
    __syncthreads();
    if (tid == 0 && good) *consumed += 1;
  }
}

// AllGather by SMs: unit u = (step j, chunk): this rank's chunk of A rows (commM * tileM rows,
// the last one shorter) into the gather region of shardPeerAt(j) (j = 0: this rank's own), then
// gatherFlag(rank, chunk) += 1 there. A peer is written only once it ended the previous call.
__global__ void __launch_bounds__(kCommThreads) fusedShardSendKernel(FusedParams p) {
  __shared__ int ok;
  const TileScheduler& s = p.sched;
  const uint64_t call = p.control->callIndex;
  const uint32_t n = p.nranks, tid = threadIdx.x, chunks = s.commTilesM;
  const uint64_t chunkRows = static_cast<uint64_t>(s.cfg.commM) * s.cfg.tileM;
  const uint64_t rowBytes = p.layout.gatherRowBytes;
  for (uint32_t u = blockIdx.x; u < n * chunks; u += gridDim.x) {
    const uint32_t peer = s.shardPeerAt(u / chunks), chunk = u % chunks;
    if (tid == 0)
      ok = waitWord(p, wordAt(p.ws, p.layout.doneOf(peer)), call, kKernelShardSend, kWaitDone,
                    static_cast<int32_t>(peer), peer, call)
               ? 1
               : 0;
    __syncthreads();
    const bool good = ok != 0;
    const uint64_t row0 = chunk * chunkRows;
    const uint64_t rows = s.segmentRows - row0 < chunkRows ? s.segmentRows - row0 : chunkRows;
    // Rows are contiguous on both sides; K * inBytes is a multiple of 16 (the executor checks).
    const uint4* src =
        reinterpret_cast<const uint4*>(static_cast<const char*>(p.a) + row0 * rowBytes);
    uint4* dst = reinterpret_cast<uint4*>(
        p.peerWs[peer] + p.layout.gatherRow(static_cast<uint64_t>(p.rank) * s.segmentRows + row0));
    const uint64_t vectors = good ? rows * rowBytes / 16 : 0;
    for (uint64_t i = tid; i < vectors; i += blockDim.x) dst[i] = src[i];
    __syncthreads();
    if (tid == 0 && good)
      signalAfterStores(wordAt(p.peerWs[peer], p.layout.gatherFlag(p.rank, chunk)));
  }
}

__global__ void fusedCopyEngineWaitKernel(FusedParams p, uint32_t peer) {
  const uint64_t call = p.control->callIndex;
  waitWord(p, wordAt(p.ws, p.layout.doneOf(peer)), call, kKernelCopyEngineWait, kWaitDone,
           static_cast<int32_t>(peer), peer, call);
}

// After a cudaMemcpyAsync earlier on the stream: the copy completed before this kernel started.
__global__ void fusedCopyEngineSignalKernel(FusedParams p, uint32_t peer, uint32_t chunk) {
  signalAfterStores(wordAt(p.peerWs[peer], p.layout.gatherFlag(p.rank, chunk)));
}

// AllGather: every gather flag of this call was consumed (the GEMM waited for each remote one,
// the own one was signalled on the side stream that joined before this kernel). Then done[rank]
// += 1 at every rank: this rank no longer reads this call's data in its workspace.
__global__ void __launch_bounds__(kCommThreads) fusedEndKernel(FusedParams p) {
  const TileScheduler& s = p.sched;
  if (s.op == FusedOp::kAllGatherGemm) {
    for (uint32_t i = threadIdx.x; i < p.nranks * s.commTilesM; i += blockDim.x)
      *wordAt(p.ws, p.layout.gatherConsumedAt(i / s.commTilesM, i % s.commTilesM)) += 1;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence_system();
  for (uint32_t j = 1; j <= p.nranks; ++j)
    device::fetchAddRelease(wordAt(p.peerWs[(p.rank + j) % p.nranks], p.layout.doneOf(p.rank)), 1);
  p.control->callIndex += 1;
}

Result checkLaunch(const char* kernel, uint32_t ctas, uint32_t threads) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "launching the fused %s kernel (%u CTAs x %u threads) failed: %s", kernel, ctas,
                    threads, cudaErrorText(e).c_str());
  return tsrSuccess;
}

struct KernelEntry {
  const char* name;
  const void* fn;
};

const KernelEntry kCommKernels[] = {
    {"reduce", reinterpret_cast<const void*>(&fusedReduceKernel)},
    {"gather copy", reinterpret_cast<const void*>(&fusedGatherCopyKernel)},
    {"shard send", reinterpret_cast<const void*>(&fusedShardSendKernel)},
    {"copy engine wait", reinterpret_cast<const void*>(&fusedCopyEngineWaitKernel)},
    {"copy engine signal", reinterpret_cast<const void*>(&fusedCopyEngineSignalKernel)},
    {"end", reinterpret_cast<const void*>(&fusedEndKernel)},
};

}  // namespace

Result prepareCommKernels() {
  for (const KernelEntry& k : kCommKernels) {
    cudaFuncAttributes attr{};
    cudaError_t e = cudaFuncGetAttributes(&attr, k.fn);
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError, "loading the fused %s kernel failed: %s", k.name,
                      cudaErrorText(e).c_str());
  }
  return tsrSuccess;
}

Result launchFusedReduce(const FusedParams& p, uint32_t ctas, void* stream) {
  fusedReduceKernel<<<ctas, kCommThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return checkLaunch("reduce", ctas, kCommThreads);
}

Result launchFusedGatherCopy(const FusedParams& p, uint32_t ctas, void* stream) {
  fusedGatherCopyKernel<<<ctas, kCommThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return checkLaunch("gather copy", ctas, kCommThreads);
}

Result launchFusedShardSend(const FusedParams& p, uint32_t ctas, void* stream) {
  fusedShardSendKernel<<<ctas, kCommThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return checkLaunch("shard send", ctas, kCommThreads);
}

Result launchFusedCopyEngineWait(const FusedParams& p, uint32_t peer, void* stream) {
  fusedCopyEngineWaitKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(p, peer);
  return checkLaunch("copy engine wait", 1, 1);
}

Result launchFusedCopyEngineSignal(const FusedParams& p, uint32_t peer, uint32_t chunk,
                                   void* stream) {
  fusedCopyEngineSignalKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(p, peer, chunk);
  return checkLaunch("copy engine signal", 1, 1);
}

Result launchFusedEnd(const FusedParams& p, void* stream) {
  fusedEndKernel<<<1, kCommThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return checkLaunch("end", 1, kCommThreads);
}

}  // namespace tessera::fused
