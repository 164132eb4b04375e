// Host-callable launchers of the fused layer's kernels (gemm_sm80.cu, comm_kernels.cu). Streams are
// cudaStream_t passed as void*, so the executor's host code needs no kernel header. Each launcher
// reports launch errors (tsrUnhandledCudaError); a wait that times out inside a kernel shows up in
// the rank's FusedErrorRecord.
//
// The kernels of one call, in stream order (device_executor.cpp):
//   GEMM+ReduceScatter / GEMM+AllReduce: gemm -> reduce -> [AllReduce: gatherCopy] -> end
//   AllGather+GEMM: fork a side stream: shardSend (SM copy) or, per peer, copyEngineWait and per
//                   chunk a cudaMemcpyAsync + copyEngineSignal; gemm on the call's stream; join;
//                   [gatheredA copy] -> end
#pragma once

#include <cstdint>

#include "core/status.hpp"
#include "fused/device/fused_params.hpp"

namespace tessera::fused {

inline constexpr uint32_t kGemmThreads = 128;
inline constexpr uint32_t kCommThreads = 256;

// Load the kernels' modules now (a lazily loaded module may wait for an idle device, which it
// never gets while peers' kernels spin). prepareGemmKernels also sets the GEMM's shared memory
// limit and returns how many GEMM CTAs fit on one SM. Call with the device current.
Result prepareGemmKernels(int* ctasPerSm);
Result prepareCommKernels();

// Persistent GEMM over every tile of p.sched; bf16 or fp16 inputs.
Result launchFusedGemm(const FusedParams& p, bool bf16, uint32_t ctas, void* stream);

// The same GEMM for compute capability 9.0 (gemm_sm90.cu: TMA loads and wgmma in a warp-specialized
// pipeline), in builds with TESSERA_FUSED_HAVE_SM90 (CUTLASS and 90 among TESSERA_CUDA_ARCHS; the
// file is compiled for sm_90a only). gemmSm90Fits: whether p's extents suit its 32-bit TMA
// coordinates (else the executor runs launchFusedGemm).
Result prepareGemmKernelsSm90(int* ctasPerSm);
Result launchFusedGemmSm90(const FusedParams& p, bool bf16, uint32_t ctas, void* stream);
bool gemmSm90Fits(const FusedParams& p);
// Whether fused calls on CUDA device `device` run the sm_90a GEMM: built in, compute capability
// 9.0, and TESSERA_FUSED_SM90 not 0. An executor asks once, at init, and keeps the answer, so
// which kernels it loaded (and its CTAs per SM) and what it launches always agree.
Result gemmSm90For(int device, bool* use);
// ReduceScatter / AllReduce: the owner's sums of the partials, per communication tile.
Result launchFusedReduce(const FusedParams& p, uint32_t ctas, void* stream);
// AllReduce: the reduced tiles of every segment from the gather region into C.
Result launchFusedGatherCopy(const FusedParams& p, uint32_t ctas, void* stream);
// AllGather: this rank's shard into every rank's gather region, chunk by chunk, with flags.
Result launchFusedShardSend(const FusedParams& p, uint32_t ctas, void* stream);
// AllGather by copy engine: one thread waits until `peer` finished the previous call.
Result launchFusedCopyEngineWait(const FusedParams& p, uint32_t peer, void* stream);
// AllGather by copy engine: adds 1 to gatherFlag(rank, chunk) at `peer` (after the copy before).
Result launchFusedCopyEngineSignal(const FusedParams& p, uint32_t peer, uint32_t chunk,
                                   void* stream);
// End of call: advances AllGather's consumed flags, adds 1 to done[rank] at every rank, and
// advances the call index.
Result launchFusedEnd(const FusedParams& p, void* stream);

}  // namespace tessera::fused
