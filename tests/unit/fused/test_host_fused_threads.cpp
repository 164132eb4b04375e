// The host fused executor with ranks as threads (inproc): every op on 1, 2, 3, 4 and 8 ranks
// against the serial double reference, shapes that are not multiples of the tiles, bias, every
// input/output type pair, atomic accumulation, repeated calls (credits) and changing shapes and
// tiles (re-baselines, a workspace that grows and is reused).
#include <gtest/gtest.h>

#include "support/harness.hpp"
#include "unit/fused/test_host_fused_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::fusedtest {
namespace {

using fused::FusedOp;
using test::RankMode;

constexpr FusedOp kOps[] = {FusedOp::kGemmReduceScatter, FusedOp::kAllGatherGemm,
                            FusedOp::kGemmAllReduce};

FusedCase makeCase(FusedOp op, uint64_t m, uint64_t n, uint64_t k, uint64_t seed) {
  FusedCase c;
  c.op = op;
  c.m = m;
  c.n = n;
  c.k = k;
  c.seed = seed;
  return c;
}

// Each op at three shapes and tile configurations (edge tiles in both directions, communication
// tiles of 1x1, 2x1 and 1x2 GEMM tiles), with and without bias; the first case twice in a row.
std::string everyOp(TransportContext& ctx) {
  const int n = ctx.nranks(), r = ctx.rank();
  std::unique_ptr<fused::HostFusedExecutor> ex;
  TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex));
  uint64_t seed = 10;
  for (FusedOp op : kOps) {
    ex->setTileConfig(tiles(8, 8, 1, 1));
    FusedCase c = makeCase(op, 13 * static_cast<uint64_t>(n), 20, 9, ++seed);
    c.bias = true;
    std::string err = runCase(*ex, r, n, c, 2);
    if (!err.empty()) return err;

    ex->setTileConfig(tiles(16, 8, 2, 1));
    c = makeCase(op, 7 * static_cast<uint64_t>(n), 33, 16, ++seed);
    c.gatheredA = op == FusedOp::kAllGatherGemm;
    c.inType = tsrBfloat16;
    err = runCase(*ex, r, n, c);
    if (!err.empty()) return err;

    ex->setTileConfig(tiles(8, 16, 1, 2));
    c = makeCase(op, 24 * static_cast<uint64_t>(n) / (n > 4 ? 2 : 1), 47, 21, ++seed);
    c.bias = true;
    c.inType = tsrFloat16;
    c.outType = tsrBfloat16;
    err = runCase(*ex, r, n, c);
    if (!err.empty()) return err;
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

TEST(HostFusedThreads, EveryOpOnOneToEightRanks) {
  for (int n : {1, 2, 3, 4, 8}) {
    SCOPED_TRACE(n);
    test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, n, everyOp));
  }
}

TEST(HostFusedThreads, EveryTypePair) {
  const tsrDataType_t types[] = {tsrFloat32, tsrFloat16, tsrBfloat16};
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 3, [&](TransportContext& ctx) {
    std::unique_ptr<fused::HostFusedExecutor> ex;
    TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 2, 1), &ex));
    uint64_t seed = 100;
    for (FusedOp op : kOps) {
      for (tsrDataType_t in : types) {
        for (tsrDataType_t out : types) {
          FusedCase c = makeCase(op, 12, 10, 7, ++seed);
          c.inType = in;
          c.outType = out;
          c.bias = seed % 2 == 0;
          std::string err = runCase(*ex, ctx.rank(), ctx.nranks(), c);
          if (!err.empty()) return err;
        }
      }
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  }));
}

// Atomic accumulation into one slot, several calls in a row: the owner must zero the slot
// before its peers add the next call's partials.
TEST(HostFusedThreads, AtomicAccumulation) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    test::expectAllRanksOk(
        test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
          std::unique_ptr<fused::HostFusedExecutor> ex;
          TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 2), &ex));
          uint64_t seed = 200;
          for (FusedOp op : {FusedOp::kGemmReduceScatter, FusedOp::kGemmAllReduce}) {
            for (tsrDataType_t t : {tsrFloat32, tsrBfloat16}) {
              FusedCase c = makeCase(op, 5 * static_cast<uint64_t>(n), 19, 11, ++seed);
              c.atomic = true;
              c.bias = true;
              c.inType = c.outType = t;
              std::string err = runCase(*ex, ctx.rank(), n, c, 3);
              if (!err.empty()) return err;
              // Back to the deterministic mode: another layout, another re-baseline.
              c.atomic = false;
              err = runCase(*ex, ctx.rank(), n, c);
              if (!err.empty()) return err;
            }
          }
          TT_CHECK_OK(ctx.bootstrap().barrier());
          return std::string();
        }));
  }
}

// Shapes that grow and shrink: the workspace grows when a layout does not fit, is reused when it
// does, and reserve() makes it fit ahead of the call.
TEST(HostFusedThreads, ChangingShapesReuseAndGrowTheWorkspace) {
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 3, [&](TransportContext& ctx) {
    const int n = ctx.nranks(), r = ctx.rank();
    std::unique_ptr<fused::HostFusedExecutor> ex;
    TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex));
    TT_CHECK(ex->workspaceBytes() == 0, "%llu bytes before any call",
             static_cast<unsigned long long>(ex->workspaceBytes()));
    FusedCase big = makeCase(FusedOp::kGemmAllReduce, 48, 40, 8, 300);
    const RankInputs in = makeInputs(big, r, n);
    std::vector<uint8_t> out(48 * 40 * 4);
    fused::FusedCall call = makeCall(big, in, out.data(), nullptr, r, n);
    TT_CHECK_OK(ex->reserve(call));
    const uint64_t reserved = ex->workspaceBytes();
    const uint64_t needed = fused::workspaceBytes(call, n, tiles(8, 8, 1, 1), true);
    TT_CHECK(reserved >= needed, "reserved %llu bytes, the call needs %llu",
             static_cast<unsigned long long>(reserved), static_cast<unsigned long long>(needed));
    uint64_t seed = 301;
    for (FusedOp op : kOps) {
      for (uint64_t m : {48, 6, 30, 48, 6}) {
        FusedCase c = makeCase(op, m, m == 6 ? 5 : 40, 8, ++seed);
        c.bias = m != 30;
        std::string err = runCase(*ex, r, n, c, m == 6 ? 2 : 1);
        if (!err.empty()) return err;
        TT_CHECK(ex->workspaceBytes() == reserved,
                 "the workspace changed to %llu bytes although %llu fit every call",
                 static_cast<unsigned long long>(ex->workspaceBytes()),
                 static_cast<unsigned long long>(reserved));
      }
    }
    // A larger call grows it.
    FusedCase c = makeCase(FusedOp::kGemmReduceScatter, 96, 48, 8, 400);
    std::string err = runCase(*ex, r, n, c);
    if (!err.empty()) return err;
    TT_CHECK(ex->workspaceBytes() > reserved, "the workspace did not grow for a larger call");
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  }));
}

// Many calls of one shape back to back: fast ranks start call c + 1 while slow ones still read
// call c, so every write into a peer's workspace must wait for that peer's done credit.
TEST(HostFusedThreads, ManyCallsInARow) {
  for (int n : {3, 8}) {
    SCOPED_TRACE(n);
    test::expectAllRanksOk(
        test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
          std::unique_ptr<fused::HostFusedExecutor> ex;
          TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex));
          uint64_t seed = 600;
          for (FusedOp op : kOps) {
            FusedCase c = makeCase(op, 3 * static_cast<uint64_t>(n), 17, 6, ++seed);
            c.bias = true;
            c.atomic = op == FusedOp::kGemmAllReduce;
            std::string err = runCase(*ex, ctx.rank(), n, c, 20);
            if (!err.empty()) return err;
          }
          TT_CHECK_OK(ctx.bootstrap().barrier());
          return std::string();
        }));
  }
}

// A seeded sweep over ops, shapes, tile and communication tile sizes, types, bias and atomic
// mode, one executor per rank through all of it (a re-baseline almost every call).
TEST(HostFusedThreads, RandomSweep) {
  for (int n : {2, 5}) {
    SCOPED_TRACE(n);
    test::expectAllRanksOk(
        test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
          std::unique_ptr<fused::HostFusedExecutor> ex;
          TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex));
          const tsrDataType_t types[] = {tsrFloat32, tsrFloat16, tsrBfloat16};
          uint64_t state = 0x5eed + static_cast<uint64_t>(n);
          auto next = [&](uint64_t bound) {  // the same sequence on every rank
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            return (state >> 33) % bound;
          };
          for (int i = 0; i < 40; ++i) {
            const FusedOp op = kOps[next(3)];
            ex->setTileConfig(
                tiles(static_cast<uint32_t>(1 + next(16)), static_cast<uint32_t>(1 + next(16)),
                      static_cast<uint32_t>(next(4)), static_cast<uint32_t>(next(4))));
            FusedCase c = makeCase(op, static_cast<uint64_t>(n) * (1 + next(12)), 1 + next(30),
                                   1 + next(20), 700 + static_cast<uint64_t>(i));
            c.inType = types[next(3)];
            c.outType = types[next(3)];
            c.bias = next(2) == 1;
            c.atomic = op != FusedOp::kAllGatherGemm && next(4) == 0;
            c.gatheredA = op == FusedOp::kAllGatherGemm && next(2) == 1;
            std::string err = runCase(*ex, ctx.rank(), n, c, 1 + static_cast<int>(next(2)));
            if (!err.empty()) return err;
          }
          TT_CHECK_OK(ctx.bootstrap().barrier());
          return std::string();
        }));
  }
}

// The default host tiles (64 x 64) at a shape that spans several of them.
TEST(HostFusedThreads, DefaultTiles) {
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<fused::HostFusedExecutor> ex;
    TT_CHECK_OK(makeExecutor(ctx, fused::hostTileConfig(), &ex));
    uint64_t seed = 500;
    for (FusedOp op : kOps) {
      FusedCase c = makeCase(op, 160, 72, 24, ++seed);
      c.bias = true;
      std::string err = runCase(*ex, ctx.rank(), ctx.nranks(), c);
      if (!err.empty()) return err;
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  }));
}

}  // namespace
}  // namespace tessera::fusedtest
