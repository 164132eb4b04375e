// The host fused executor with ranks as forked processes: over shm (peers mapped, the same code
// path as threads but across address spaces) and over ucx (peers not mapped: every remote write
// is an RDMA put from the staging tiles or gather regions, every signal a remote atomic).
#include <gtest/gtest.h>

#include "support/harness.hpp"
#include "transport/transport.hpp"
#include "unit/fused/test_host_fused_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::fusedtest {
namespace {

using fused::FusedOp;
using test::RankMode;

constexpr FusedOp kOps[] = {FusedOp::kGemmReduceScatter, FusedOp::kAllGatherGemm,
                            FusedOp::kGemmAllReduce};

std::string checkTransport(TransportContext& ctx, TransportKind want) {
  for (int p = 0; p < ctx.nranks(); ++p) {
    if (p == ctx.rank()) continue;
    TransportKind k;
    std::string why;
    TT_CHECK_OK(ctx.selectTransport(p, &k, &why));
    TT_CHECK(k == want, "peer %d is reached over %s, not %s", p, transportName(k),
             transportName(want));
  }
  return "";
}

// Every op at two shapes and tile configurations, the first twice in a row (credits), bias and
// gathered A on some. More calls in flight than staging tiles, so ucx must flush before reuse.
std::string everyOp(TransportContext& ctx, TransportKind kind) {
  std::string err = checkTransport(ctx, kind);
  if (!err.empty()) return err;
  const int n = ctx.nranks(), r = ctx.rank();
  std::unique_ptr<fused::HostFusedExecutor> ex;
  TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex));
  uint64_t seed = 1000;
  for (FusedOp op : kOps) {
    ex->setTileConfig(tiles(8, 8, 1, 1));
    FusedCase c;
    c.op = op;
    c.m = 11 * static_cast<uint64_t>(n);
    c.n = 26;
    c.k = 10;
    c.bias = true;
    c.seed = ++seed;
    err = runCase(*ex, r, n, c, 2);
    if (!err.empty()) return err;

    ex->setTileConfig(tiles(16, 8, 2, 2));
    c.m = 20 * static_cast<uint64_t>(n);
    c.n = 41;
    c.k = 13;
    c.bias = false;
    c.inType = tsrBfloat16;
    c.outType = tsrFloat16;
    c.gatheredA = op == FusedOp::kAllGatherGemm;
    c.seed = ++seed;
    err = runCase(*ex, r, n, c);
    if (!err.empty()) return err;
  }
  // Peers may still signal this workspace (the last done credit) until they are through.
  TT_CHECK_OK(ctx.bootstrap().barrier());
  return "";
}

TEST(HostFusedShm, EveryOpOnProcessRanks) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    test::expectAllRanksOk(
        test::runTransportRanks(RankMode::kProcesses, n, [&](TransportContext& ctx) {
          std::string err = everyOp(ctx, TransportKind::kShm);
          if (!err.empty()) return err;
          // Atomic accumulation works across processes too (the slot is in shared memory).
          std::unique_ptr<fused::HostFusedExecutor> ex;
          TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex));
          FusedCase c;
          c.op = FusedOp::kGemmAllReduce;
          c.m = 6 * static_cast<uint64_t>(n);
          c.n = 17;
          c.k = 9;
          c.atomic = true;
          c.seed = 77;
          err = runCase(*ex, ctx.rank(), n, c, 2);
          if (!err.empty()) return err;
          TT_CHECK_OK(ctx.bootstrap().barrier());
          return std::string();
        }));
  }
}

TEST(HostFusedUcx, EveryOpOnProcessRanks) {
  std::string why;
  if (!transportBuilt(TransportKind::kUcx, &why)) GTEST_SKIP() << "ucx: " << why;
  test::ScopedEnv transport("TESSERA_TRANSPORT", "ucx");
  test::ScopedEnv tls("UCX_TLS", "tcp");
  for (int n : {2, 3}) {
    SCOPED_TRACE(n);
    test::expectAllRanksOk(
        test::runTransportRanks(RankMode::kProcesses, n, [&](TransportContext& ctx) {
          std::string err = everyOp(ctx, TransportKind::kUcx);
          if (!err.empty()) return err;
          // Atomic accumulation needs mapped peers: every rank refuses it alike (so none is left
          // waiting), and the executor stays usable for the deterministic mode.
          std::unique_ptr<fused::HostFusedExecutor> ex;
          TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex));
          FusedCase c;
          c.op = FusedOp::kGemmReduceScatter;
          c.m = 8 * static_cast<uint64_t>(n);
          c.n = 12;
          c.k = 5;
          c.atomic = true;
          RankInputs in = makeInputs(c, ctx.rank(), n);
          std::vector<float> out(8 * 12);
          fused::FusedCall call = makeCall(c, in, out.data(), nullptr, ctx.rank(), n);
          Result res = ex->run(call);
          TT_CHECK(res == tsrInvalidUsage, "atomic over ucx gave %s", resultName(res));
          TT_CHECK(std::string(lastErrorMessage()).find("atomic") != std::string::npos,
                   "the sentence does not say why: %s", lastErrorMessage());
          c.atomic = false;
          err = runCase(*ex, ctx.rank(), n, c, 2);
          if (!err.empty()) return err;
          TT_CHECK_OK(ctx.bootstrap().barrier());
          return std::string();
        }));
  }
}

}  // namespace
}  // namespace tessera::fusedtest
