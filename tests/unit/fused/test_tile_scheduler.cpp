// The fused tile scheduler and workspace layout (fused/tile_scheduler.hpp, fused/layout.hpp),
// checked exhaustively over small grids: every tile visited once per rank with the right
// coordinates, communication tiles complete and contiguous in the order, the rank rotation
// (distinct owners or shards at every step), AllGather's shard routing, and layouts whose
// regions are aligned, disjoint and large enough for every index the protocol uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/status.hpp"
#include "fused/layout.hpp"
#include "fused/tile_scheduler.hpp"

namespace tessera::fused {
namespace {

constexpr FusedOp kOps[] = {FusedOp::kGemmReduceScatter, FusedOp::kAllGatherGemm,
                            FusedOp::kGemmAllReduce};

struct Grid {
  FusedOp op;
  uint32_t n;
  uint64_t m, cols;
  TileConfig cfg;
};

std::string name(const Grid& g) {
  return strprintf("op %d n=%u M=%llu N=%llu tiles %ux%u comm %ux%u", static_cast<int>(g.op), g.n,
                   static_cast<unsigned long long>(g.m), static_cast<unsigned long long>(g.cols),
                   g.cfg.tileM, g.cfg.tileN, g.cfg.commM, g.cfg.commN);
}

// One rank's order: each tile once, coordinates and edges right, segments in rotation order,
// communication tiles contiguous and complete. "" or what is wrong.
std::string checkRank(const Grid& g, uint32_t rank) {
  const TileScheduler s = TileScheduler::make(g.op, rank, g.n, g.m, g.cols, g.cfg);
  const uint64_t segRows = g.m / g.n;
  const uint32_t tilesM = static_cast<uint32_t>((segRows + g.cfg.tileM - 1) / g.cfg.tileM);
  const uint32_t tilesN = static_cast<uint32_t>((g.cols + g.cfg.tileN - 1) / g.cfg.tileN);
  if (s.tilesM != tilesM || s.tilesN != tilesN || s.tilesPerSegment != uint64_t{tilesM} * tilesN)
    return "tile counts";
  if (s.numTiles() != s.tilesPerSegment * g.n) return "numTiles";
  uint64_t inCommTiles = 0;
  for (uint32_t ct = 0; ct < s.commTilesPerSegment(); ++ct) inCommTiles += s.tilesInCommTile(ct);
  if (inCommTiles != s.tilesPerSegment) return "communication tiles do not add up to a segment";

  std::vector<uint8_t> seen(s.numTiles(), 0);
  std::vector<uint8_t> ctDone(uint64_t{g.n} * s.commTilesPerSegment(), 0);
  uint32_t runCt = UINT32_MAX, runSeg = UINT32_MAX, runLeft = 0;
  for (uint64_t t = 0; t < s.numTiles(); ++t) {
    const TileCoord c = s.tile(t);
    const uint32_t step = static_cast<uint32_t>(t / s.tilesPerSegment);
    const uint32_t want =
        g.op == FusedOp::kAllGatherGemm ? (rank + step) % g.n : (rank + 1 + step) % g.n;
    if (c.segment != want || s.segmentAt(step) != want)
      return strprintf("rank %u tile %llu: segment %u, expected %u", rank,
                       static_cast<unsigned long long>(t), c.segment, want);
    if (c.tileRow >= tilesM || c.tileCol >= tilesN) return "tile outside the grid";
    uint64_t id = (uint64_t{c.segment} * tilesM + c.tileRow) * tilesN + c.tileCol;
    if (seen[id]++) return strprintf("rank %u visits a tile twice", rank);
    const uint64_t r0 = uint64_t{c.tileRow} * g.cfg.tileM, c0 = uint64_t{c.tileCol} * g.cfg.tileN;
    if (c.row0 != c.segment * segRows + r0 || c.col0 != c0 ||
        c.rows != std::min<uint64_t>(g.cfg.tileM, segRows - r0) ||
        c.cols != std::min<uint64_t>(g.cfg.tileN, g.cols - c0) || c.rows == 0 || c.cols == 0)
      return strprintf("rank %u tile (%u, %u): rows %llu+%u cols %llu+%u", rank, c.tileRow,
                       c.tileCol, static_cast<unsigned long long>(c.row0), c.rows,
                       static_cast<unsigned long long>(c.col0), c.cols);
    // s.cfg: commM / commN of 0 were taken as 1.
    const uint32_t ct = (c.tileRow / s.cfg.commM) * s.commTilesN + c.tileCol / s.cfg.commN;
    if (c.commTile != ct || s.commTileOf(c.tileRow, c.tileCol) != ct)
      return strprintf("tile (%u, %u): communication tile %u, expected %u", c.tileRow, c.tileCol,
                       c.commTile, ct);
    // A communication tile's GEMM tiles come one after another, then it never comes back.
    if (runLeft == 0) {
      uint8_t& done = ctDone[uint64_t{c.segment} * s.commTilesPerSegment() + ct];
      if (done) return strprintf("communication tile %u of segment %u comes back", ct, c.segment);
      done = 1;
      runCt = ct;
      runSeg = c.segment;
      runLeft = s.tilesInCommTile(ct);
    } else if (ct != runCt || c.segment != runSeg) {
      return strprintf("communication tile %u interrupted by %u", runCt, ct);
    }
    --runLeft;
  }
  if (runLeft != 0) return "the last communication tile is incomplete";
  return "";
}

// Across ranks: at every step the ranks work on distinct segments (owners or shards), and at
// every tile index too; AllGather's owner sends a shard at step j to the rank reading it then.
std::string checkRotation(const Grid& g) {
  std::vector<TileScheduler> s;
  for (uint32_t r = 0; r < g.n; ++r)
    s.push_back(TileScheduler::make(g.op, r, g.n, g.m, g.cols, g.cfg));
  for (uint32_t step = 0; step < g.n; ++step) {
    std::vector<uint8_t> used(g.n, 0);
    for (uint32_t r = 0; r < g.n; ++r)
      if (used[s[r].segmentAt(step)]++) return strprintf("step %u: two ranks on one segment", step);
    if (g.op == FusedOp::kAllGatherGemm && step > 0) {
      for (uint32_t owner = 0; owner < g.n; ++owner) {
        uint32_t reader = s[owner].shardPeerAt(step);
        if (reader == owner || s[reader].segmentAt(step) != owner)
          return strprintf("step %u: rank %u sends its shard to %u, which reads shard %u", step,
                           owner, reader, s[reader].segmentAt(step));
      }
    }
  }
  for (uint64_t t = 0; t < s[0].numTiles(); ++t) {
    std::vector<uint8_t> used(g.n, 0);
    for (uint32_t r = 0; r < g.n; ++r)
      if (used[s[r].tile(t).segment]++)
        return strprintf("tile index %llu: two ranks on one segment",
                         static_cast<unsigned long long>(t));
  }
  return "";
}

// Regions aligned and disjoint; every index the protocol uses falls inside its region.
std::string checkLayout(const Grid& g, uint64_t k, uint32_t inBytes, uint32_t outBytes, bool atomic,
                        bool staging) {
  const TileScheduler s = TileScheduler::make(g.op, 0, g.n, g.m, g.cols, g.cfg);
  const WorkspaceLayout l = workspaceLayout(s, k, inBytes, outBytes, atomic, staging);
  const bool reduces = g.op != FusedOp::kAllGatherGemm;
  const uint32_t ctps = s.commTilesPerSegment();
  if (l.numTileCounters != (reduces ? ctps : 0u) ||
      l.flagStride != (g.op == FusedOp::kAllGatherGemm ? s.commTilesM : ctps) ||
      l.numGatherFlags != (g.op == FusedOp::kGemmReduceScatter ? 0u : g.n * l.flagStride) ||
      l.slots != (reduces ? (atomic ? 1u : g.n) : 0u) ||
      l.tileFloats != uint64_t{g.cfg.tileM} * g.cfg.tileN)
    return "region sizes";
  const std::pair<uint64_t, uint64_t> regions[] = {{l.tileCounters, 8ull * l.numTileCounters},
                                                   {l.gatherFlags, 8ull * l.numGatherFlags},
                                                   {l.done, 8ull * g.n},
                                                   {l.tileConsumed, 8ull * l.numTileCounters},
                                                   {l.gatherConsumed, 8ull * l.numGatherFlags},
                                                   {l.partials, l.slots * l.slotBytes},
                                                   {l.gather, l.gatherBytes},
                                                   {l.staging, l.stagingBytes}};
  uint64_t end = 0;
  for (const auto& [at, bytes] : regions) {
    if (at % kAlign != 0) return "unaligned region";
    if (at < end) return "overlapping regions";
    end = at + bytes;
  }
  if (l.total < end || l.total % kAlign != 0) return "total";
  if (l.stagingBytes != (staging ? kStagingTiles * l.tileFloats * 4 : 0)) return "staging";
  if (l.doneOf(g.n - 1) + 8 > l.done + 8ull * g.n) return "done words";
  if (reduces) {
    if (l.tileCounter(ctps - 1) + 8 > l.gatherFlags ||
        l.tileConsumedAt(ctps - 1) + 8 > l.gatherConsumed)
      return "tile counters";
    if (l.partialTile(l.slots - 1, s.tilesPerSegment - 1) + l.tileFloats * 4 >
        l.partials + l.slots * l.slotBytes)
      return "partial slots";
  }
  if (g.op == FusedOp::kGemmAllReduce) {
    if (l.gatherFlag(g.n - 1, ctps - 1) + 8 > l.gatherFlags + 8ull * l.numGatherFlags ||
        l.gatherConsumedAt(g.n - 1, ctps - 1) + 8 > l.gatherConsumed + 8ull * l.numGatherFlags)
      return "gather flags";
    if (l.gatherTile(g.n - 1, s.tilesPerSegment - 1, s.tilesPerSegment) + l.tileFloats * outBytes >
        l.gather + l.gatherBytes)
      return "gather tiles";
  }
  if (g.op == FusedOp::kAllGatherGemm) {
    if (l.gatherFlag(g.n - 1, s.commTilesM - 1) + 8 > l.gatherFlags + 8ull * l.numGatherFlags)
      return "gather flags";
    // Ranks with different N_r must agree on the layout.
    const TileScheduler wide = TileScheduler::make(g.op, 0, g.n, g.m, g.cols * 3 + 7, g.cfg);
    if (workspaceLayout(wide, k, inBytes, outBytes, atomic, staging).total != l.total)
      return "AllGather layout depends on N";
    if (l.gatherRow(g.m - 1) + k * inBytes != l.gather + l.gatherBytes) return "gathered rows";
  }
  return "";
}

TEST(TileScheduler, EveryTileOnceRotationAndLayout) {
  const TileConfig configs[] = {{8, 8, 1, 1},  {16, 8, 2, 1},    {3, 5, 1, 3},
                                {8, 16, 3, 2}, {128, 128, 1, 1}, {5, 3, 2, 2}};
  int grids = 0;
  for (FusedOp op : kOps) {
    for (uint32_t n = 1; n <= 8; ++n) {
      for (uint64_t rowsPerRank : {1, 7, 33}) {
        for (uint64_t cols : {1, 5, 40}) {
          for (const TileConfig& cfg : configs) {
            Grid g{op, n, rowsPerRank * n, cols, cfg};
            for (uint32_t r = 0; r < n; ++r) {
              std::string err = checkRank(g, r);
              ASSERT_EQ(err, "") << name(g) << " rank " << r;
            }
            std::string err = checkRotation(g);
            ASSERT_EQ(err, "") << name(g);
            for (uint64_t k : {1, 7}) {
              for (bool atomic : {false, true}) {
                if (atomic && op == FusedOp::kAllGatherGemm) continue;
                for (bool staging : {false, true}) {
                  err = checkLayout(g, k, 2, atomic ? 4 : 2, atomic, staging);
                  ASSERT_EQ(err, "") << name(g) << " k=" << k;
                }
              }
            }
            ++grids;
          }
        }
      }
    }
  }
  EXPECT_EQ(grids, 3 * 8 * 3 * 3 * 6);
}

// commM / commN of 0 mean 1.
TEST(TileScheduler, ZeroCommTileSizeMeansOne) {
  TileScheduler s = TileScheduler::make(FusedOp::kGemmReduceScatter, 1, 2, 40, 30, {8, 8, 0, 0});
  EXPECT_EQ(s.cfg.commM, 1u);
  EXPECT_EQ(s.cfg.commN, 1u);
  EXPECT_EQ(s.commTilesPerSegment(), s.tilesPerSegment);
  EXPECT_EQ(checkRank({FusedOp::kGemmReduceScatter, 2, 40, 30, {8, 8, 0, 0}}, 1), "");
}

// The orders the file comment promises, spelled out for n = 4.
TEST(TileScheduler, SegmentOrders) {
  for (uint32_t r = 0; r < 4; ++r) {
    TileScheduler rs = TileScheduler::make(FusedOp::kGemmReduceScatter, r, 4, 64, 16, {});
    TileScheduler ag = TileScheduler::make(FusedOp::kAllGatherGemm, r, 4, 64, 16, {});
    EXPECT_EQ(rs.segmentAt(0), (r + 1) % 4) << "remote owners first";
    EXPECT_EQ(rs.segmentAt(3), r) << "own rows last";
    EXPECT_EQ(ag.segmentAt(0), r) << "local shard first";
    for (uint32_t j = 1; j < 4; ++j) EXPECT_EQ(ag.shardPeerAt(j), (r + 4 - j) % 4);
  }
}

}  // namespace
}  // namespace tessera::fused
