// The fused layer's workspace: what one rank's registered memory holds, where peers write into
// it, and where its counters are (DESIGN.md, "Fused", "Memory ordering"). Shared by the host
// reference executor and the GPU kernels, so both speak the same protocol.
//
// Every rank has a workspace of the same layout (same call, same shape). Regions, each aligned to
// kAlign bytes:
//   counters  (uint64 words; peers add to them, the owner reads them with acquire)
//     tileCounters[commTilesPerSegment]   ReduceScatter/AllReduce: one per communication tile of
//                                          this rank's segment; each producer adds 1 per GEMM tile
//                                          it delivered (n * tilesInCommTile per call)
//     gatherFlags[n * flagStride]          AllReduce: owner s adds 1 per reduced communication tile
//                                          of segment s it delivered here (flagStride =
//                                          commTilesPerSegment); AllGather: owner s adds 1 per
//                                          chunk (commM * tileM rows) of its shard (flagStride =
//                                          commTilesM: N_r may differ between ranks, so AllGather's
//                                          layout must not depend on N)
//     done[n]                              peer p adds 1 when it finished a call; a producer writes
//                                          into p's workspace in call c only after done[p] >= c
//                                          (p no longer reads call c - 1's data)
//   consumed  (uint64 words, local only): how much of each counter this rank already consumed, as
//             a semaphore's `expected` (counters only grow; targets are consumed + this call's)
//     tileConsumed[commTilesPerSegment], gatherConsumed[n * flagStride]
//   partials  ReduceScatter/AllReduce: `slots` slots (n, or 1 when accumulating atomically) of
//             tilesPerSegment tiles, each tile tileM x tileN floats, row-major with leading
//             dimension tileN (full size even for edge tiles). Slot p holds rank p's partial of
//             this rank's segment; the atomic slot 0 holds the running sum (zero between calls).
//   gather    AllReduce: the reduced C of every segment, tile-contiguous like the partials but in
//             the output type (n * tilesPerSegment tiles of tileM x tileN); AllGather: the
//             gathered A, M x K row-major in the input type.
//   staging   host executor only: kStagingTiles tiles of tileM x tileN floats, the registered
//             source of puts over transports that do not map peer memory (ucx).
#pragma once

#include <stdint.h>

#include "fused/tile_scheduler.hpp"

namespace tessera::fused {

inline constexpr uint64_t kAlign = 256;
inline constexpr uint32_t kStagingTiles = 4;

TSR_INLINE uint64_t alignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct WorkspaceLayout {
  // Byte offsets inside the workspace.
  uint64_t tileCounters;
  uint64_t gatherFlags;
  uint64_t done;
  uint64_t tileConsumed;
  uint64_t gatherConsumed;
  uint64_t partials;
  uint64_t gather;
  uint64_t staging;
  uint64_t total;  // bytes
  // Sizes.
  uint32_t slots;            // partial slots (0 for AllGather)
  uint32_t numTileCounters;  // 0 for AllGather
  uint32_t numGatherFlags;   // n * flagStride for AllReduce and AllGather, else 0
  uint32_t flagStride;       // gather flags per segment (see the file comment)
  uint64_t tileFloats;       // tileM * tileN
  uint64_t slotBytes;        // bytes of one partial slot
  uint64_t gatherBytes;
  uint64_t stagingBytes;
  uint32_t gatherElemBytes;  // element size of the gather region
  uint64_t gatherRowBytes;   // AllGather: bytes of one row of A (k * inBytes)

  TSR_INLINE uint64_t tileCounter(uint32_t commTile) const {
    return tileCounters + 8ull * commTile;
  }
  TSR_INLINE uint64_t tileConsumedAt(uint32_t commTile) const {
    return tileConsumed + 8ull * commTile;
  }
  // Gather flag `index` (AllReduce: communication tile; AllGather: chunk) of `segment`.
  TSR_INLINE uint64_t gatherFlag(uint32_t segment, uint32_t index) const {
    return gatherFlags + 8ull * (static_cast<uint64_t>(segment) * flagStride + index);
  }
  TSR_INLINE uint64_t gatherConsumedAt(uint32_t segment, uint32_t index) const {
    return gatherConsumed + 8ull * (static_cast<uint64_t>(segment) * flagStride + index);
  }
  TSR_INLINE uint64_t doneOf(uint32_t peer) const { return done + 8ull * peer; }
  // Start of (tileRow, tileCol)'s tile in partial slot `slot`.
  TSR_INLINE uint64_t partialTile(uint32_t slot, uint64_t tileInSegment) const {
    return partials + slot * slotBytes + tileInSegment * tileFloats * 4;
  }
  // AllReduce: start of a reduced tile of `segment` in the gather region.
  TSR_INLINE uint64_t gatherTile(uint32_t segment, uint64_t tileInSegment,
                                 uint64_t tilesPerSegment) const {
    return gather + (segment * tilesPerSegment + tileInSegment) * tileFloats * gatherElemBytes;
  }
  // AllGather: start of row `row` (absolute) of the gathered A.
  TSR_INLINE uint64_t gatherRow(uint64_t row) const { return gather + row * gatherRowBytes; }
};

// The layout for a call of `s.op` with inner dimension k (this rank's K). inBytes / outBytes:
// element sizes of A/B and of C. `atomic`: ReduceScatter accumulates into one slot.
// `hostStaging`: add the host executor's staging tiles.
TSR_INLINE WorkspaceLayout workspaceLayout(const TileScheduler& s, uint64_t k, uint32_t inBytes,
                                           uint32_t outBytes, bool atomic, bool hostStaging) {
  WorkspaceLayout l{};
  const bool reduces = s.op != FusedOp::kAllGatherGemm;
  const uint32_t ctps = s.commTilesPerSegment();
  l.numTileCounters = reduces ? ctps : 0;
  l.flagStride = s.op == FusedOp::kAllGatherGemm ? s.commTilesM : ctps;
  l.numGatherFlags = s.op == FusedOp::kGemmReduceScatter ? 0 : s.nranks * l.flagStride;
  l.slots = reduces ? (atomic ? 1u : s.nranks) : 0u;
  l.tileFloats = static_cast<uint64_t>(s.cfg.tileM) * s.cfg.tileN;
  l.slotBytes = reduces ? s.tilesPerSegment * l.tileFloats * 4 : 0;
  if (s.op == FusedOp::kGemmAllReduce) {
    l.gatherElemBytes = outBytes;
    l.gatherBytes = s.nranks * s.tilesPerSegment * l.tileFloats * outBytes;
  } else if (s.op == FusedOp::kAllGatherGemm) {
    l.gatherElemBytes = inBytes;
    l.gatherRowBytes = k * inBytes;
    l.gatherBytes = s.segmentRows * s.nranks * l.gatherRowBytes;
  }
  l.stagingBytes = hostStaging ? kStagingTiles * l.tileFloats * 4 : 0;

  uint64_t at = 0;
  l.tileCounters = at;
  at = alignUp(at + 8ull * l.numTileCounters);
  l.gatherFlags = at;
  at = alignUp(at + 8ull * l.numGatherFlags);
  l.done = at;
  at = alignUp(at + 8ull * s.nranks);
  l.tileConsumed = at;
  at = alignUp(at + 8ull * l.numTileCounters);
  l.gatherConsumed = at;
  at = alignUp(at + 8ull * l.numGatherFlags);
  l.partials = at;
  at = alignUp(at + l.slots * l.slotBytes);
  l.gather = at;
  at = alignUp(at + l.gatherBytes);
  l.staging = at;
  at = alignUp(at + l.stagingBytes);
  l.total = at;
  return l;
}

}  // namespace tessera::fused
