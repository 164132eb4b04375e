// What the fused layer's GPU kernels receive (kernels.hpp launches them, device_executor.cpp fills
// it): plain data shared by host code and nvcc, no CUDA header.
//
// Kernels read the call index from a device word (the end-of-call kernel advances it) rather than
// from a launch argument: a graph replay repeats launch arguments (DESIGN.md), so this keeps graph
// capture possible later. Today the executor refuses capture (device_engine.hpp).
#pragma once

#include <stdint.h>

#include "fused/layout.hpp"
#include "fused/tile_scheduler.hpp"

namespace tessera::fused {

// The GEMM tile the kernels are compiled for (deviceTileConfig()'s default); commM/commN are free.
inline constexpr uint32_t kDeviceTileM = 128;
inline constexpr uint32_t kDeviceTileN = 128;

enum FusedKernelId : uint32_t {
  kKernelGemm = 1,
  kKernelReduce = 2,
  kKernelGatherCopy = 3,
  kKernelShardSend = 4,
  kKernelCopyEngineWait = 5,
};

enum FusedWaitKind : uint32_t {
  kWaitDone = 1,         // done[peer]: the peer finished the previous call
  kWaitTileCounter = 2,  // tileCounters[index]: every producer delivered the tiles
  kWaitGatherFlag = 3,   // gatherFlags[peer][index]: the peer delivered a chunk / reduced tile
};

enum FusedOutType : uint32_t { kOutFloat32 = 0, kOutFloat16 = 1, kOutBfloat16 = 2 };

// The first wait of a rank's kernels that passed its deadline. Lives in mapped pinned host
// memory, so the host reads it at the next call without synchronizing a stream; `code` is
// written last (after a system fence), the fields before it.
inline constexpr uint32_t kFusedAborted = 2;

struct FusedErrorRecord {
  uint32_t code;  // 0: none; 1: a wait timed out; kFusedAborted: the host aborted (tsrCommAbort)
  uint32_t kernel;
  uint32_t wait;
  int32_t peer;  // -1: several producers (a tile counter)
  uint32_t index;
  uint32_t pad;
  uint64_t expected;
  uint64_t seen;
  uint64_t callIndex;
};

// Device words of one rank that outlive workspace re-allocation.
struct FusedControl {
  uint64_t callIndex;  // calls since the last re-baseline (the end-of-call kernel adds 1)
  uint32_t claim;      // 0 -> 1 by the thread that fills the error record
  uint32_t pad;
};

struct FusedParams {
  TileScheduler sched;     // this rank's tile order (its own N for AllGather+GEMM)
  WorkspaceLayout layout;  // the layout every rank shares
  uint32_t rank;
  uint32_t nranks;
  uint32_t outType;  // FusedOutType
  uint32_t atomic;   // partials accumulate into slot 0
  uint32_t pad;
  char* ws;                 // this rank's workspace
  char* const* peerWs;      // device array: every rank's workspace as mapped here (own included)
  FusedControl* control;    // device memory
  FusedErrorRecord* error;  // device view of the mapped host record
  const void* a;
  const void* b;
  const void* bias;
  void* c;
  uint64_t k;  // inner dimension
  uint64_t timeoutNs;
};

}  // namespace tessera::fused
