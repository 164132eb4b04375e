// The fused layer's tile scheduler (DESIGN.md, "Fused"), shared by the host reference executor and
// the GPU kernels: plain data and TSR_INLINE functions, no allocation, no library calls.
//
// The output C of one rank is cut into n row *segments* of M/n rows each (n = ranks):
// - GEMM+ReduceScatter and GEMM+AllReduce: segment s holds the rows rank s owns (it receives
//   every rank's partial of them and reduces them).
// - AllGather+GEMM: segment s holds the rows computed from rank s's shard of A.
// A segment is cut into GEMM tiles (tileM x tileN elements; the last row and column of tiles may
// be partial) and, separately, into *communication tiles*: commM x commN GEMM tiles, the unit of
// signalling (one counter each). GEMM tiles are visited communication tile by communication
// tile, so a counter completes as early as the order allows.
//
// Order (per rank r, step j = 0..n-1 over segments):
// - ReduceScatter / AllReduce: segment (r + 1 + j) mod n: remote owners first, the rank's own rows
//   last; at every step the n ranks write to n distinct owners.
// - AllGather: segment (r + j) mod n: the local shard first (it needs no wait), then the shard that
//   arrives first; at every step the n ranks read n distinct shards. The owner s of a shard sends
//   it to rank (s - j) mod n at step j = 1..n-1, which is the rank that reads it at step j.
#pragma once

#include <stdint.h>

#include "tessera/device/host_device.hpp"

namespace tessera::fused {

enum class FusedOp : uint8_t {
  kGemmReduceScatter = 0,
  kAllGatherGemm = 1,
  kGemmAllReduce = 2,
};

// GEMM tile and communication tile sizes. commM / commN count GEMM tiles.
struct TileConfig {
  uint32_t tileM = 128;
  uint32_t tileN = 128;
  uint32_t commM = 1;
  uint32_t commN = 1;
};

// A GEMM tile: segment, tile row and tile column inside the segment, and the element range.
struct TileCoord {
  uint32_t segment;
  uint32_t tileRow;  // inside the segment
  uint32_t tileCol;
  uint64_t row0;      // first row of C (absolute: segment * segmentRows + tileRow * tileM)
  uint64_t col0;      // first column of C
  uint32_t rows;      // <= tileM (the last tile row of a segment may be partial)
  uint32_t cols;      // <= tileN
  uint32_t commTile;  // the communication tile it belongs to, inside the segment
};

struct TileScheduler {
  FusedOp op;
  uint32_t rank;
  uint32_t nranks;
  uint64_t segmentRows;  // M / n
  uint64_t cols;         // N of this rank's C
  TileConfig cfg;
  uint32_t tilesM;      // tile rows per segment
  uint32_t tilesN;      // tile columns
  uint32_t commTilesM;  // communication tile rows per segment
  uint32_t commTilesN;  // communication tile columns
  uint64_t tilesPerSegment;

  // M must be a multiple of nranks and every size positive (fused.hpp's checks say so to the
  // user before a scheduler is made); commM/commN of 0 are taken as 1.
  TSR_INLINE static TileScheduler make(FusedOp op, uint32_t rank, uint32_t nranks, uint64_t m,
                                       uint64_t n, TileConfig cfg) {
    TileScheduler s{};
    s.op = op;
    s.rank = rank;
    s.nranks = nranks;
    s.segmentRows = m / nranks;
    s.cols = n;
    if (cfg.commM == 0) cfg.commM = 1;
    if (cfg.commN == 0) cfg.commN = 1;
    s.cfg = cfg;
    s.tilesM = static_cast<uint32_t>((s.segmentRows + cfg.tileM - 1) / cfg.tileM);
    s.tilesN = static_cast<uint32_t>((n + cfg.tileN - 1) / cfg.tileN);
    s.commTilesM = (s.tilesM + cfg.commM - 1) / cfg.commM;
    s.commTilesN = (s.tilesN + cfg.commN - 1) / cfg.commN;
    s.tilesPerSegment = static_cast<uint64_t>(s.tilesM) * s.tilesN;
    return s;
  }

  TSR_INLINE uint64_t numTiles() const { return tilesPerSegment * nranks; }
  TSR_INLINE uint32_t commTilesPerSegment() const { return commTilesM * commTilesN; }

  // The segment this rank works on at step j (see the file comment).
  TSR_INLINE uint32_t segmentAt(uint32_t step) const {
    uint32_t first = op == FusedOp::kAllGatherGemm ? rank : rank + 1;
    return (first + step) % nranks;
  }
  // AllGather: the peer this rank sends its shard to at step j (1..n-1).
  TSR_INLINE uint32_t shardPeerAt(uint32_t step) const {
    return (rank + nranks - step % nranks) % nranks;
  }

  // GEMM tiles of communication tile (ctRow, ctCol) in any segment (edge ones are smaller).
  TSR_INLINE uint32_t commTileRows(uint32_t ctRow) const {
    uint32_t left = tilesM - ctRow * cfg.commM;
    return left < cfg.commM ? left : cfg.commM;
  }
  TSR_INLINE uint32_t commTileCols(uint32_t ctCol) const {
    uint32_t left = tilesN - ctCol * cfg.commN;
    return left < cfg.commN ? left : cfg.commN;
  }
  TSR_INLINE uint32_t tilesInCommTile(uint32_t commTile) const {
    return commTileRows(commTile / commTilesN) * commTileCols(commTile % commTilesN);
  }
  TSR_INLINE uint32_t commTileOf(uint32_t tileRow, uint32_t tileCol) const {
    return (tileRow / cfg.commM) * commTilesN + tileCol / cfg.commN;
  }

  // The coordinates of a (segment, tile row, tile column).
  TSR_INLINE TileCoord coord(uint32_t segment, uint32_t tileRow, uint32_t tileCol) const {
    TileCoord c{};
    c.segment = segment;
    c.tileRow = tileRow;
    c.tileCol = tileCol;
    uint64_t r0 = static_cast<uint64_t>(tileRow) * cfg.tileM;
    c.row0 = segment * segmentRows + r0;
    c.col0 = static_cast<uint64_t>(tileCol) * cfg.tileN;
    uint64_t rowsLeft = segmentRows - r0, colsLeft = cols - c.col0;
    c.rows = static_cast<uint32_t>(rowsLeft < cfg.tileM ? rowsLeft : cfg.tileM);
    c.cols = static_cast<uint32_t>(colsLeft < cfg.tileN ? colsLeft : cfg.tileN);
    c.commTile = commTileOf(tileRow, tileCol);
    return c;
  }

  // The t-th tile (0 <= t < numTiles()) of this rank's order: segment by segment (segmentAt),
  // inside a segment communication tile by communication tile (row-major), inside one row-major.
  TSR_INLINE TileCoord tile(uint64_t t) const {
    uint32_t step = static_cast<uint32_t>(t / tilesPerSegment);
    uint64_t within = t % tilesPerSegment;
    // Every band of commM tile rows but the last is full, so the band index is a division.
    uint64_t bandTiles = static_cast<uint64_t>(cfg.commM) * tilesN;
    uint32_t band = static_cast<uint32_t>(within / bandTiles);
    uint64_t w = within - band * bandTiles;
    uint32_t bandRows = commTileRows(band);
    // Inside a band, every communication tile but the last is commN columns wide.
    uint64_t ctTiles = static_cast<uint64_t>(bandRows) * cfg.commN;
    uint32_t ctCol = static_cast<uint32_t>(w / ctTiles);
    uint32_t w2 = static_cast<uint32_t>(w - ctCol * ctTiles);
    uint32_t width = commTileCols(ctCol);
    return coord(segmentAt(step), band * cfg.commM + w2 / width, ctCol * cfg.commN + w2 % width);
  }
};

}  // namespace tessera::fused
