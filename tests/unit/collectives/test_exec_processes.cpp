// The engine with ranks as forked processes (shm), and zero-copy with registered buffers: malloc
// memory between threads (inproc), tsrMemAlloc-style shareable memory between processes.
#include <gtest/gtest.h>

#include "support/harness.hpp"
#include "test_exec_common.hpp"
#include "transport/transport.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

const FamilyColl kShmCases[] = {
    {"ring", Collective::kAllReduce},    {"ring", Collective::kReduceScatter},
    {"ring", Collective::kAllGather},    {"ring", Collective::kBroadcast},
    {"ring", Collective::kReduce},       {"pairwise", Collective::kAllToAll},
    {"oneshot", Collective::kAllReduce},
};

bool usable(const std::vector<Usable>& plans, const char* family, Collective c) {
  for (const Usable& u : plans)
    if (u.family == family && u.coll == c) return true;
  return false;
}

// The families of kShmCases on n process ranks whose peers all use `kind`.
void collectivesOverProcesses(int n, TransportKind kind) {
  std::vector<std::string> skipped;
  std::vector<Usable> plans = usablePlans(n, {}, &skipped);
  auto results = test::runTransportRanks(RankMode::kProcesses, n, [&](TransportContext& ctx) {
    for (int p = 0; p < ctx.nranks(); ++p) {
      TransportKind k;
      std::string why;
      TT_CHECK_OK(ctx.selectTransport(p == ctx.rank() ? (p + 1) % n : p, &k, &why));
      TT_CHECK(k == kind, "peers use %s, not %s", transportName(k), transportName(kind));
    }
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    for (const FamilyColl& fc : kShmCases) {
      if (!usable(plans, fc.family, fc.coll)) continue;
      for (size_t count : {size_t{1}, size_t{1000}, size_t{40000}}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && fc.coll == Collective::kAllToAll) continue;
          CollCase c{fc.coll, fc.family, tsrFloat32, RedKind::kSum, count, n - 1, inPlace, 2};
          std::string err = runAndCheck(*e, ctx.rank(), n, c);
          if (!err.empty()) return err;
        }
      }
    }
    // Send/recv through the same transport, both directions at once, several slots long.
    std::vector<int32_t> out(70000), in(70000);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(i) * 3 + ctx.rank();
    int next = (ctx.rank() + 1) % n, prev = (ctx.rank() + n - 1) % n;
    TT_CHECK_OK(runP2P(*e, {P2PCall{false, prev, nullptr, in.data(), in.size(), tsrInt32},
                            P2PCall{true, next, out.data(), nullptr, out.size(), tsrInt32}}));
    for (size_t i = 0; i < in.size(); ++i)
      TT_CHECK(in[i] == static_cast<int32_t>(i) * 3 + prev, "p2p element %zu: %d", i, in[i]);
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(ExecShm, CollectivesOverProcesses) {
  for (int n : {2, 3}) collectivesOverProcesses(n, TransportKind::kShm);
}

// Peers that are not mapped: puts and gets through the connection, staged in registered memory.
TEST(ExecUcx, CollectivesOverProcesses) {
  std::string why;
  if (!transportBuilt(TransportKind::kUcx, &why)) GTEST_SKIP() << "ucx: " << why;
  test::ScopedEnv transport("TESSERA_TRANSPORT", "ucx");
  test::ScopedEnv tls("UCX_TLS", "tcp");
  collectivesOverProcesses(3, TransportKind::kUcx);
}

// Zero-copy: buffers registered on every rank, a call above the threshold; the operation must
// have run a zero-copy plan (its description says so) and give the reference result. The same
// call on unregistered buffers runs the plain plan between processes, and zero-copy on the
// peers' own addresses between threads (`threads`).
std::string zeroCopyCases(CollectiveEngine& e, int rank, int n, bool shared, bool threads) {
  int ran = 0;
  for (const AlgorithmInfo& info : algorithms()) {
    for (Collective coll : info.collectives) {
      GenParams g;
      g.collective = coll;
      g.algorithm = info.name;
      g.nranks = n;
      g.zeroCopy = true;
      Plan p;
      if (generatePlan(g, &p) != tsrSuccess || !p.zeroCopy) continue;
      for (bool inPlace : {false, true}) {
        if (inPlace && coll == Collective::kAllToAll) continue;
        CollCase c{coll, info.name, tsrFloat32, RedKind::kSum, 3000, 0, inPlace, 4};
        c.registerBuffers = true;
        c.sharedAlloc = shared;
        std::string described;
        std::string err = runAndCheck(e, rank, n, c, &described);
        if (!err.empty()) return err;
        if (described.find("on registered buffers") == std::string::npos)
          return caseName(c, n) + ": did not run zero-copy: " + described;
        c.registerBuffers = false;
        err = runAndCheck(e, rank, n, c, &described);
        if (!err.empty()) return err;
        if (threads && described.find("on the peers' own addresses") == std::string::npos)
          return caseName(c, n) + ": did not run zero-copy on addresses: " + described;
        if (!threads && described.find("zero-copy") != std::string::npos)
          return caseName(c, n) + ": ran zero-copy without registrations: " + described;
        ++ran;
      }
    }
  }
  if (ran == 0) return "no family generated a zero-copy plan";
  return "";
}

TEST(ExecZeroCopy, RegisteredMallocBuffersBetweenThreads) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "4096");
  for (int n : {2, 3}) {
    auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
      return zeroCopyCases(*e, ctx.rank(), n, false, true);
    });
    test::expectAllRanksOk(results);
  }
}

TEST(ExecZeroCopy, SharedAllocationsBetweenProcesses) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "4096");
  auto results = test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    return zeroCopyCases(*e, ctx.rank(), 2, true, false);
  });
  test::expectAllRanksOk(results);
}

// Malloc memory cannot be mapped by another process: registered or not, the call runs the plain
// plan (every rank decides so from the handshake) and is right.
TEST(ExecZeroCopy, MallocBuffersBetweenProcessesFallBack) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "4096");
  auto results = test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    CollCase c{Collective::kAllReduce, "ring", tsrFloat32, RedKind::kSum, 3000, 0, false, 1};
    c.registerBuffers = true;
    std::string described;
    std::string err = runAndCheck(*e, ctx.rank(), 2, c, &described);
    if (!err.empty()) return err;
    TT_CHECK(described.find("zero-copy") == std::string::npos, "ran %s", described.c_str());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::exectest
