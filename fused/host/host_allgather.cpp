// AllGather+GEMM on the host (host_executor.hpp). Rank r copies its shard of A into its own
// gather region, then sends it chunk by chunk (one chunk per band of commM tile rows) to the
// peers in the scheduler's order shardPeerAt(1..n-1), each chunk followed by its flag; then it
// computes its C tiles in the scheduler's order (own shard first), each tile waiting for the flag
// of the chunk of A it reads.
#include <algorithm>
#include <cstring>

#include "core/datatype.hpp"
#include "fused/host/host_executor.hpp"
#include "fused/host/host_gemm.hpp"

namespace tessera::fused {

Result HostFusedEngine::runAllGather(const FusedCall& call, const CallSetup& cs) {
  const TileScheduler& s = cs.sched;
  const WorkspaceLayout& l = cs.layout;
  const auto self = static_cast<uint32_t>(rank_);
  const uint64_t k = call.shape.k, cols = call.shape.n, segRows = s.segmentRows;
  const uint64_t chunkRows = static_cast<uint64_t>(s.cfg.commM) * s.cfg.tileM;
  const uint32_t chunks = s.commTilesM;
  auto chunkSize = [&](uint32_t ch) { return std::min(chunkRows, segRows - ch * chunkRows); };

  // The own shard is the source of every put below: it stays unchanged until the end-of-call
  // flush, as puts over ucx require.
  std::memcpy(at(l.gatherRow(self * segRows)), call.a, segRows * l.gatherRowBytes);
  for (uint32_t j = 1; j < static_cast<uint32_t>(nranks_); ++j) {
    const auto peer = static_cast<int>(s.shardPeerAt(j));
    TSR_CHECK(credit(peer));
    for (uint32_t ch = 0; ch < chunks; ++ch) {
      const uint64_t off = l.gatherRow(self * segRows + ch * chunkRows);
      TSR_CHECK(put(peer, off, off, chunkSize(ch) * l.gatherRowBytes));
      TSR_CHECK(signal(peer, l.gatherFlag(self, ch)));
    }
  }

  // A as float: the gather region itself for float inputs, else each chunk converted once it
  // has arrived.
  const bool floatIn = call.inType == tsrFloat32;
  if (!floatIn && aFloat_.size() < call.shape.m * k) aFloat_.resize(call.shape.m * k);
  const float* a = floatIn ? reinterpret_cast<const float*>(at(l.gather)) : aFloat_.data();
  const float* b = floatView(call.inType, call.b, k * cols, &bFloat_);
  if (tile_.size() < l.tileFloats) tile_.resize(l.tileFloats);
  ready_.assign(static_cast<size_t>(nranks_) * chunks, 0);
  const uint32_t tileN = s.cfg.tileN;
  const uint64_t outBytes = dtypeSize(call.outType);
  auto* c = static_cast<char*>(call.c);
  const auto* bias = static_cast<const char*>(call.bias);

  for (uint64_t t = 0; t < s.numTiles(); ++t) {
    const TileCoord tile = s.tile(t);
    const uint32_t ch = tile.tileRow / s.cfg.commM;
    uint8_t& ready = ready_[static_cast<size_t>(tile.segment) * chunks + ch];
    if (!ready) {
      if (tile.segment != self) {
        uint64_t* consumed = word(l.gatherConsumedAt(tile.segment, ch));
        const uint64_t target = *consumed + 1;
        TSR_CHECK(waitAtLeast(l.gatherFlag(tile.segment, ch), target,
                              static_cast<int>(tile.segment),
                              "chunk %u (%llu rows) of rank %u's shard of A", ch,
                              static_cast<unsigned long long>(chunkSize(ch)), tile.segment));
        *consumed = target;
      }
      if (!floatIn) {
        const uint64_t r0 = tile.segment * segRows + ch * chunkRows;
        convertToFloat(call.inType, at(l.gatherRow(r0)), aFloat_.data() + r0 * k,
                       chunkSize(ch) * k);
      }
      ready = 1;
    }
    gemmTile(a + tile.row0 * k, k, b + tile.col0, cols, tile_.data(), tileN, tile.rows, tile.cols,
             k);
    const char* tileBias = bias ? bias + tile.col0 * outBytes : nullptr;
    for (uint32_t i = 0; i < tile.rows; ++i)
      storeFromFloat(call.outType, tile_.data() + static_cast<uint64_t>(i) * tileN, tileBias,
                     c + ((tile.row0 + i) * cols + tile.col0) * outBytes, tile.cols);
  }
  // Every chunk was waited for above (each holds at least one tile row of every tile column).
  if (call.gatheredA) std::memcpy(call.gatheredA, at(l.gather), call.shape.m * l.gatherRowBytes);
  return tsrSuccess;
}

}  // namespace tessera::fused
