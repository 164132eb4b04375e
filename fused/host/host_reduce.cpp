// GEMM+ReduceScatter and GEMM+AllReduce on the host (host_executor.hpp). Rank r walks its tiles
// in the scheduler's order (remote owners first, its own segment last); each finished partial
// tile goes into the owner's slot [r] (or is added into the owner's slot 0 in atomic mode) and
// bumps the owner's counter of that communication tile. Then r reduces its own segment
// communication tile by communication tile, slots in rank order 0..n-1 then the bias, all in
// float, so the result does not depend on arrival order. AllReduce then sends each reduced tile
// (output type) to every peer's gather region with a flag, and copies the other segments out of
// its own gather region as their flags arrive.
#include <atomic>
#include <cstring>

#include "core/datatype.hpp"
#include "fused/host/host_executor.hpp"
#include "fused/host/host_gemm.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;
}  // namespace

Result HostFusedEngine::runReduce(const FusedCall& call, const CallSetup& cs) {
  const TileScheduler& s = cs.sched;
  const WorkspaceLayout& l = cs.layout;
  const uint64_t k = call.shape.k, cols = call.shape.n;
  const uint32_t tileN = s.cfg.tileN;
  const float* a = floatView(call.inType, call.a, call.shape.m * k, &aFloat_);
  const float* b = floatView(call.inType, call.b, k * cols, &bFloat_);
  if (tile_.size() < l.tileFloats) tile_.resize(l.tileFloats);
  const auto self = static_cast<uint32_t>(rank_);

  for (uint64_t t = 0; t < s.numTiles(); ++t) {
    const TileCoord c = s.tile(t);
    const int owner = static_cast<int>(c.segment);
    const uint64_t idx = static_cast<uint64_t>(c.tileRow) * s.tilesN + c.tileCol;
    const float* at = a + c.row0 * k;
    const float* bt = b + c.col0;
    if (owner != rank_) TSR_CHECK(credit(owner));
    if (call.atomic) {
      gemmTile(at, k, bt, cols, tile_.data(), tileN, c.rows, c.cols, k);
      char* peerBase = owner == rank_ ? base_ : static_cast<char*>(remote_[c.segment]->mapped());
      if (peerBase == nullptr)
        return TSR_FAIL(tsrInvalidUsage,
                        "rank %d: atomic accumulation needs peer %d's workspace mapped, and its "
                        "connection does not map memory",
                        rank_, owner);
      auto* slot = reinterpret_cast<float*>(peerBase + l.partialTile(0, idx));
      for (uint32_t i = 0; i < c.rows; ++i)
        for (uint32_t j = 0; j < c.cols; ++j)
          std::atomic_ref<float>(slot[i * tileN + j])
              .fetch_add(tile_[i * tileN + j], std::memory_order_relaxed);
    } else if (owner == rank_) {
      auto* dst = reinterpret_cast<float*>(this->at(l.partialTile(self, idx)));
      gemmTile(at, k, bt, cols, dst, tileN, c.rows, c.cols, k);
    } else {
      uint32_t slot = 0;
      TSR_CHECK(takeStaging(&slot));
      const uint64_t src = l.staging + slot * l.tileFloats * sizeof(float);
      gemmTile(at, k, bt, cols, reinterpret_cast<float*>(this->at(src)), tileN, c.rows, c.cols, k);
      TSR_CHECK(put(owner, l.partialTile(self, idx), src,
                    static_cast<uint64_t>(c.rows) * tileN * sizeof(float)));
      noteStagingPut(slot, owner);
    }
    // Ordered after the tile's data (a release add; on ucx after the put).
    TSR_CHECK(signal(owner, l.tileCounter(c.commTile)));
  }

  const bool allReduce = call.op == FusedOp::kGemmAllReduce;
  for (uint32_t ct = 0; ct < s.commTilesPerSegment(); ++ct) {
    TSR_CHECK(reduceCommTile(call, cs, ct));
    if (allReduce) TSR_CHECK(sendReducedCommTile(cs, ct));
  }
  if (allReduce) TSR_CHECK(receiveReduced(call, cs));
  return tsrSuccess;
}

Result HostFusedEngine::reduceCommTile(const FusedCall& call, const CallSetup& cs, uint32_t ct) {
  const TileScheduler& s = cs.sched;
  const WorkspaceLayout& l = cs.layout;
  const auto n = static_cast<uint32_t>(nranks_);
  const uint32_t tiles = s.tilesInCommTile(ct);
  uint64_t* consumed = word(l.tileConsumedAt(ct));
  const uint64_t target = *consumed + static_cast<uint64_t>(n) * tiles;
  TSR_CHECK(waitAtLeast(l.tileCounter(ct), target, -1,
                        "the partials of communication tile %u of its segment (%u ranks x %u "
                        "tiles)",
                        ct, n, tiles));
  *consumed = target;

  const uint32_t tileN = s.cfg.tileN;
  const uint64_t outBytes = dtypeSize(call.outType);
  const uint64_t cols = call.shape.n;
  const bool allReduce = call.op == FusedOp::kGemmAllReduce;
  // ReduceScatter's C holds only this rank's segment; AllReduce's holds all of them.
  const uint64_t firstRow = allReduce ? 0 : static_cast<uint64_t>(rank_) * s.segmentRows;
  auto* c = static_cast<char*>(call.c);
  const auto* bias = static_cast<const char*>(call.bias);
  if (row_.size() < tileN) row_.resize(tileN);
  float* acc = row_.data();

  const uint32_t ctRow = ct / s.commTilesN, ctCol = ct % s.commTilesN;
  const uint32_t tr0 = ctRow * s.cfg.commM, tc0 = ctCol * s.cfg.commN;
  for (uint32_t tr = tr0; tr < tr0 + s.commTileRows(ctRow); ++tr) {
    for (uint32_t tc = tc0; tc < tc0 + s.commTileCols(ctCol); ++tc) {
      const TileCoord tile = s.coord(static_cast<uint32_t>(rank_), tr, tc);
      const uint64_t idx = static_cast<uint64_t>(tr) * s.tilesN + tc;
      const char* tileBias = bias ? bias + tile.col0 * outBytes : nullptr;
      char* gathered = allReduce
                           ? at(l.gatherTile(static_cast<uint32_t>(rank_), idx, s.tilesPerSegment))
                           : nullptr;
      for (uint32_t i = 0; i < tile.rows; ++i) {
        const uint64_t rowOffset = static_cast<uint64_t>(i) * tileN;
        if (call.atomic) {
          // Slot 0 holds the sum; it must be zero again before peers add the next call's.
          auto* sum = reinterpret_cast<float*>(at(l.partialTile(0, idx))) + rowOffset;
          std::memcpy(acc, sum, tile.cols * sizeof(float));
          std::memset(sum, 0, tile.cols * sizeof(float));
        } else {
          const auto* s0 = reinterpret_cast<const float*>(at(l.partialTile(0, idx))) + rowOffset;
          for (uint32_t j = 0; j < tile.cols; ++j) acc[j] = s0[j];
          for (uint32_t p = 1; p < n; ++p) {
            const auto* sp = reinterpret_cast<const float*>(at(l.partialTile(p, idx))) + rowOffset;
            for (uint32_t j = 0; j < tile.cols; ++j) acc[j] += sp[j];
          }
        }
        char* dst = c + ((tile.row0 - firstRow + i) * cols + tile.col0) * outBytes;
        storeFromFloat(call.outType, acc, tileBias, dst, tile.cols);
        if (gathered) std::memcpy(gathered + rowOffset * outBytes, dst, tile.cols * outBytes);
      }
    }
  }
  return tsrSuccess;
}

// The reduced tiles of one communication tile go to every peer, one put per tile row (the tiles
// of a row of a communication tile are adjacent in the gather region), then the flag.
Result HostFusedEngine::sendReducedCommTile(const CallSetup& cs, uint32_t ct) {
  const TileScheduler& s = cs.sched;
  const WorkspaceLayout& l = cs.layout;
  const auto self = static_cast<uint32_t>(rank_);
  const uint32_t ctRow = ct / s.commTilesN, ctCol = ct % s.commTilesN;
  const uint32_t tr0 = ctRow * s.cfg.commM, tc0 = ctCol * s.cfg.commN;
  const uint64_t rowBytes = s.commTileCols(ctCol) * l.tileFloats * l.gatherElemBytes;
  for (int j = 1; j < nranks_; ++j) {
    const int peer = (rank_ + j) % nranks_;
    TSR_CHECK(credit(peer));
    for (uint32_t tr = tr0; tr < tr0 + s.commTileRows(ctRow); ++tr) {
      const uint64_t off =
          l.gatherTile(self, static_cast<uint64_t>(tr) * s.tilesN + tc0, s.tilesPerSegment);
      TSR_CHECK(put(peer, off, off, rowBytes));
    }
    TSR_CHECK(signal(peer, l.gatherFlag(self, ct)));
  }
  return tsrSuccess;
}

Result HostFusedEngine::receiveReduced(const FusedCall& call, const CallSetup& cs) {
  const TileScheduler& s = cs.sched;
  const WorkspaceLayout& l = cs.layout;
  const uint64_t outBytes = dtypeSize(call.outType), cols = call.shape.n;
  const uint32_t tileN = s.cfg.tileN;
  auto* c = static_cast<char*>(call.c);
  // Owner q sends to q+1, q+2, ... in turn, so segment rank-1 tends to arrive first.
  for (int j = 1; j < nranks_; ++j) {
    const auto seg = static_cast<uint32_t>((rank_ + nranks_ - j) % nranks_);
    for (uint32_t ct = 0; ct < s.commTilesPerSegment(); ++ct) {
      uint64_t* consumed = word(l.gatherConsumedAt(seg, ct));
      const uint64_t target = *consumed + 1;
      TSR_CHECK(waitAtLeast(l.gatherFlag(seg, ct), target, static_cast<int>(seg),
                            "reduced communication tile %u of segment %u", ct, seg));
      *consumed = target;
      const uint32_t ctRow = ct / s.commTilesN, ctCol = ct % s.commTilesN;
      const uint32_t tr0 = ctRow * s.cfg.commM, tc0 = ctCol * s.cfg.commN;
      for (uint32_t tr = tr0; tr < tr0 + s.commTileRows(ctRow); ++tr) {
        for (uint32_t tc = tc0; tc < tc0 + s.commTileCols(ctCol); ++tc) {
          const TileCoord tile = s.coord(seg, tr, tc);
          const char* src =
              at(l.gatherTile(seg, static_cast<uint64_t>(tr) * s.tilesN + tc, s.tilesPerSegment));
          for (uint32_t i = 0; i < tile.rows; ++i)
            std::memcpy(c + ((tile.row0 + i) * cols + tile.col0) * outBytes,
                        src + static_cast<uint64_t>(i) * tileN * outBytes, tile.cols * outBytes);
        }
      }
    }
  }
  return tsrSuccess;
}

}  // namespace tessera::fused
