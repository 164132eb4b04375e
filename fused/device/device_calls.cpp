// What one fused call launches (device_engine.hpp, kernels.hpp): the kernels' parameters, their
// grid sizes under the deadlock rule, and the order of launches per op.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_stream.hpp"
#include "core/datatype.hpp"
#include "core/env.hpp"
#include "fused/device/device_engine.hpp"
#include "fused/device/kernels.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

uint32_t outTypeCode(tsrDataType_t t) {
  return t == tsrFloat16 ? kOutFloat16 : t == tsrBfloat16 ? kOutBfloat16 : kOutFloat32;
}

// The sm_90a GEMM where init chose it and the shape suits its TMA coordinates, else the sm80 one
// (init loaded both there, and sized the grid for the larger of the two).
Result launchGemm(const FusedParams& p, bool bf16, uint32_t ctas, bool sm90, void* stream) {
#if defined(TESSERA_FUSED_HAVE_SM90)
  if (sm90 && gemmSm90Fits(p)) return launchFusedGemmSm90(p, bf16, ctas, stream);
#else
  (void)sm90;
#endif
  return launchFusedGemm(p, bf16, ctas, stream);
}
}  // namespace

Result gemmSm90For(int device, bool* use) {
  *use = false;
#if defined(TESSERA_FUSED_HAVE_SM90)
  bool wanted = true;
  TSR_CHECK(envBool("TESSERA_FUSED_SM90", &wanted));
  if (!wanted) return tsrSuccess;
  int major = 0, minor = 0;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "reading CUDA device %d's compute capability (to pick the fused GEMM) failed: "
                    "%s",
                    device, cudaErrorText(e).c_str());
  // Arch-specific sm_90a code loads on compute capability 9.0 only.
  *use = major == 9 && minor == 0;
#else
  (void)device;
#endif
  return tsrSuccess;
}

FusedParams DeviceFusedEngine::params(const FusedCall& call, const CallSetup& cs) const {
  FusedParams p{};
  p.sched = cs.sched;
  p.layout = cs.layout;
  p.rank = static_cast<uint32_t>(o_.rank);
  p.nranks = static_cast<uint32_t>(o_.nranks);
  p.outType = outTypeCode(call.outType);
  p.atomic = call.atomic ? 1u : 0u;
  p.ws = static_cast<char*>(ws_->data());
  p.peerWs = peerTable_;
  p.control = control_;
  p.error = errorDevice_;
  p.a = call.a;
  p.b = call.b;
  p.bias = call.bias;
  p.c = call.c;
  p.k = call.shape.k;
  // Past 2^63 ns (292 years) the deadline is as good as none.
  const double ns = o_.timeoutSeconds * 1e9;
  p.timeoutNs = ns >= 9.2e18 ? UINT64_MAX : ns <= 0 ? 0 : static_cast<uint64_t>(ns);
  return p;
}

uint32_t DeviceFusedEngine::gemmCtas(const CallSetup& cs) const {
  // One rank waits on nobody but its own earlier kernels; otherwise half of the GPU's GEMM slots,
  // shared by the ranks on it, so that the kernels they wait for always find room.
  const uint64_t slots = static_cast<uint64_t>(sms_) * static_cast<uint64_t>(gemmPerSm_);
  // With one rank on this GPU, a ReduceScatter/AllReduce GEMM waits only on done words that earlier
  // kernels wrote, so it may take the whole GPU; AllGather's GEMM waits on its own shard sender,
  // which must stay resident beside it.
  const bool alone = localRanks_ == 1 && cs.sched.op != FusedOp::kAllGatherGemm;
  const uint64_t cap =
      o_.nranks == 1 || alone
          ? slots
          : std::max<uint64_t>(1, slots / (2 * static_cast<uint64_t>(localRanks_)));
  return static_cast<uint32_t>(std::min<uint64_t>(cs.sched.numTiles(), cap));
}

uint32_t DeviceFusedEngine::smallCtas(uint64_t units) const {
  const uint64_t cap = std::max<uint64_t>(1, static_cast<uint64_t>(sms_) / (2 * localRanks_));
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(units, cap)));
}

Result DeviceFusedEngine::launchReduceCall(const FusedCall& call, const CallSetup& cs,
                                           void* stream) {
  const FusedParams p = params(call, cs);
  const uint32_t ctps = cs.sched.commTilesPerSegment();
  TSR_CHECK(launchGemm(p, call.inType == tsrBfloat16, gemmCtas(cs), sm90_, stream));
  TSR_CHECK(launchFusedReduce(p, smallCtas(ctps), stream));
  if (call.op == FusedOp::kGemmAllReduce)
    TSR_CHECK(launchFusedGatherCopy(p, smallCtas(static_cast<uint64_t>(o_.nranks) * ctps), stream));
  return launchFusedEnd(p, stream);
}

Result DeviceFusedEngine::launchAllGatherCall(const FusedCall& call, const CallSetup& cs,
                                              void* stream) {
  const FusedParams p = params(call, cs);
  const int rank = o_.rank;
  // The shards move on the side stream while the GEMM runs; both start where the call starts on
  // `stream`, and the end of the call waits for both.
  TSR_CHECK(
      TSR_CUDA_CHECK(cudaEventRecord(asEvent(fork_), asStream(stream)), rank, "cudaEventRecord"));
  TSR_CHECK(TSR_CUDA_CHECK(cudaStreamWaitEvent(asStream(side_), asEvent(fork_), 0), rank,
                           "cudaStreamWaitEvent"));
  if (call.copyEngine)
    TSR_CHECK(copyEngineShards(call, cs, p));
  else
    TSR_CHECK(launchFusedShardSend(
        p, smallCtas(static_cast<uint64_t>(o_.nranks) * cs.sched.commTilesM), side_));
  TSR_CHECK(
      TSR_CUDA_CHECK(cudaEventRecord(asEvent(join_), asStream(side_)), rank, "cudaEventRecord"));
  TSR_CHECK(launchGemm(p, call.inType == tsrBfloat16, gemmCtas(cs), sm90_, stream));
  TSR_CHECK(TSR_CUDA_CHECK(cudaStreamWaitEvent(asStream(stream), asEvent(join_), 0), rank,
                           "cudaStreamWaitEvent"));
  if (call.gatheredA != nullptr) {
    // Complete here: the GEMM waited for every remote chunk, the side stream wrote the own shard.
    const uint64_t bytes = call.shape.m * call.shape.k * dtypeSize(call.inType);
    TSR_CHECK(TSR_CUDA_CHECK(cudaMemcpyAsync(call.gatheredA, p.ws + cs.layout.gather, bytes,
                                             cudaMemcpyDeviceToDevice, asStream(stream)),
                             rank, "copying the gathered A"));
  }
  return launchFusedEnd(p, stream);
}

// The copy-engine variant of fusedShardSendKernel: per peer (shardPeerAt order, the own rank
// first) a one-thread wait for the peer's previous call, then per chunk a copy and a one-thread
// signal. A wait that times out records the error but cannot hold back the copy behind it.
Result DeviceFusedEngine::copyEngineShards(const FusedCall& call, const CallSetup& cs,
                                           const FusedParams& p) {
  const TileScheduler& s = cs.sched;
  const uint64_t chunkRows = static_cast<uint64_t>(s.cfg.commM) * s.cfg.tileM;
  const uint64_t rowBytes = cs.layout.gatherRowBytes;
  const uint64_t first = static_cast<uint64_t>(o_.rank) * s.segmentRows;
  for (uint32_t j = 0; j < s.nranks; ++j) {
    const uint32_t peer = s.shardPeerAt(j);
    if (peer != s.rank) TSR_CHECK(launchFusedCopyEngineWait(p, peer, side_));
    for (uint32_t chunk = 0; chunk < s.commTilesM; ++chunk) {
      const uint64_t row0 = chunk * chunkRows;
      const uint64_t rows = std::min(chunkRows, s.segmentRows - row0);
      char* dst = peerWs_[peer] + cs.layout.gatherRow(first + row0);
      const char* src = static_cast<const char*>(call.a) + row0 * rowBytes;
      TSR_CHECK(TSR_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, rows * rowBytes, cudaMemcpyDefault, asStream(side_)), o_.rank,
          "copying a shard of A by copy engine"));
      TSR_CHECK(launchFusedCopyEngineSignal(p, peer, chunk, side_));
    }
  }
  return tsrSuccess;
}

}  // namespace tessera::fused
