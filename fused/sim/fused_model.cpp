// The fused operations' timeline on a model of one node (fused_model.hpp).
#include "fused/sim/fused_model.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <vector>

namespace tessera::fused {

bool simulateFused(const FusedModelInput& in, FusedModelResult* out) {
  *out = FusedModelResult{};
  if (in.nranks == 0 || in.m == 0 || in.n == 0 || in.k == 0 || in.m % in.nranks != 0 ||
      in.sms == 0 || !(in.linkBytesPerUs > 0) || !(in.memBytesPerUs > 0))
    return false;
  const uint32_t n = in.nranks;
  const uint32_t rank = 0;  // every rank's timeline is the same (fused_model.hpp)
  TileScheduler s = TileScheduler::make(in.op, rank, n, in.m, in.n, in.tiles);
  const double segBytes = static_cast<double>(s.segmentRows) * in.n * in.elemBytes;

  // When the shard read at step j has landed (AllGather): the owner sends its shard, K columns
  // of its rows, to one rank per step, one transfer after another over its link.
  std::vector<double> segmentReady(n, 0.0);
  if (in.op == FusedOp::kAllGatherGemm) {
    const double shardBytes = static_cast<double>(s.segmentRows) * in.k * in.elemBytes;
    for (uint32_t j = 1; j < n; ++j)
      segmentReady[s.segmentAt(j)] = j * shardBytes / in.linkBytesPerUs + in.linkLatencyUs;
  }

  // SMs as a heap of the times they become free.
  std::priority_queue<double, std::vector<double>, std::greater<double>> sm;
  for (uint32_t i = 0; i < in.sms; ++i) sm.push(0.0);
  // Per communication tile of the current segment: GEMM tiles left, and when the last ended.
  std::vector<uint32_t> left(s.commTilesPerSegment());
  std::vector<double> lastEnd(s.commTilesPerSegment());
  double linkFree = 0, gemmEnd = 0, ownRowsLanded = 0;
  uint32_t segment = ~0u;
  auto startSegment = [&](uint32_t seg) {
    segment = seg;
    for (uint32_t c = 0; c < s.commTilesPerSegment(); ++c) {
      left[c] = s.tilesInCommTile(c);
      lastEnd[c] = 0;
    }
  };
  const uint64_t tiles = s.numTiles();
  for (uint64_t t = 0; t < tiles; ++t) {
    TileCoord c = s.tile(t);
    if (c.segment != segment) startSegment(c.segment);
    double start = std::max(sm.top(), segmentReady[c.segment]);
    sm.pop();
    double end = start + in.tileUs;  // an edge tile costs a whole tile
    sm.push(end);
    gemmEnd = std::max(gemmEnd, end);
    lastEnd[c.commTile] = std::max(lastEnd[c.commTile], end);
    if (--left[c.commTile] != 0 || in.op == FusedOp::kAllGatherGemm) continue;
    if (c.segment == rank) continue;  // the rank's own rows stay
    // Put the finished communication tile to its owner.
    double bytes = 0;
    uint32_t ctRow = c.commTile / s.commTilesN, ctCol = c.commTile % s.commTilesN;
    for (uint32_t r = 0; r < s.commTileRows(ctRow); ++r)
      for (uint32_t q = 0; q < s.commTileCols(ctCol); ++q) {
        TileCoord g = s.coord(c.segment, ctRow * s.cfg.commM + r, ctCol * s.cfg.commN + q);
        bytes += static_cast<double>(g.rows) * g.cols * in.elemBytes;
      }
    double putStart = std::max(linkFree, lastEnd[c.commTile]);
    linkFree = putStart + bytes / in.linkBytesPerUs;
    // By symmetry the last partial of this rank's rows lands when this rank's last put does.
    ownRowsLanded = std::max(ownRowsLanded, linkFree + in.linkLatencyUs);
    ++out->puts;
  }
  double endUs = gemmEnd;
  if (in.op != FusedOp::kAllGatherGemm) {
    // Reduce the n partials of the own rows once all have landed (and its own GEMM ended).
    double reduce = (n + 1) * segBytes / in.memBytesPerUs;
    endUs = std::max(gemmEnd, ownRowsLanded) + (n > 1 ? reduce : 0);
    if (in.op == FusedOp::kGemmAllReduce && n > 1)
      endUs += (n - 1) * segBytes / in.linkBytesPerUs + in.linkLatencyUs;
  }
  out->us = endUs;
  out->gemmUs = gemmEnd;
  out->commTailUs = endUs - gemmEnd;
  out->tiles = tiles;
  return true;
}

}  // namespace tessera::fused
