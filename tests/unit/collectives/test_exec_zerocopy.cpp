// What the zero-copy handshake keeps of peers' registrations between calls: a peer's buffer is
// mapped only when a zero-copy plan reaches it (its owner may free it otherwise), deregistered
// buffers are unmapped by the peers that held them, and the per-peer caches stay bounded and in
// step when they evict.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>

#include "collectives/exec/engine_impl.hpp"
#include "support/harness.hpp"
#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

// A family whose allreduce for n ranks has a zero-copy form ("" when none does).
std::string zeroCopyAllReduce(int n) {
  for (const AlgorithmInfo& info : algorithms()) {
    GenParams g;
    g.algorithm = info.name;
    g.nranks = n;
    g.zeroCopy = true;
    Plan p;
    if (generatePlan(g, &p) == tsrSuccess && p.zeroCopy) return info.name;
  }
  return "";
}

// Mappings of tsrMemAlloc-style memory (own or a peer's) in this process.
int userMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("memfd:tessera-user") != std::string::npos) ++n;
  return n;
}

// Rank 1 registers nothing, so the broadcast runs the plain plan. Rank 2 reads rank 0's record
// only after rank 0 finished the call and deregistered its buffers: rank 2 must not try to map
// them (it used to, and failed, poisoning its engine).
TEST(ExecZeroCopyImports, PeerBuffersOfAPlainPlanAreNeverMapped) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "1024");
  // Thread ranks would otherwise reach rank 1's unregistered buffers at their addresses.
  test::ScopedEnv noAddresses("TESSERA_CMA", "0");
  constexpr size_t kCount = 3000;
  std::atomic<bool> published{false}, rootDone{false};
  auto results = test::runTransportRanks(RankMode::kThreads, 3, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    int rank = ctx.rank();
    std::vector<float> in(kCount), out(kCount, -1.0f);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>(i % 13 + rank * 100);
    CollCall call;
    call.collective = Collective::kBroadcast;
    call.sendbuf = in.data();
    call.recvbuf = out.data();
    call.count = kCount;
    call.root = 0;
    call.algorithm = "ring";
    // Plans are bound (a step that blocks in start()) by a first call together.
    TT_CHECK_OK(runCall(*e, call));
    std::fill(out.begin(), out.end(), -1.0f);
    std::vector<void*> handles;
    if (rank != 1) {
      for (std::vector<float>* v : {&in, &out}) {
        void* h = nullptr;
        TT_CHECK_OK(e->registerBuffer(v->data(), v->size() * sizeof(float), &h));
        handles.push_back(h);
      }
    }
    if (rank == 2) {
      std::unique_ptr<Operation> op;
      TT_CHECK_OK(e->start(call, &op));
      bool done = false;
      TT_CHECK_OK(op->progress(&done));  // publishes; rank 0's record is not there yet
      TT_CHECK(!done, "the broadcast finished before rank 0 started it");
      published.store(true);
      bool alone = test::waitUntil([&] { return rootDone.load(); }, 10);
      TT_CHECK_OK(runOperations({op.get()}, 20));
      TT_CHECK(alone, "rank 0 did not finish the call without rank 2 (the scenario needs it)");
      TT_CHECK(op->describe().find("zero-copy") == std::string::npos, "%s", op->describe().c_str());
    } else if (rank == 0) {
      TT_CHECK(test::waitUntil([&] { return published.load(); }, 10),
               "rank 2 did not publish its record");
      TT_CHECK_OK(runCall(*e, call));
      for (void* h : handles) TT_CHECK_OK(e->deregisterBuffer(h));
      handles.clear();
      rootDone.store(true);
    } else {
      TT_CHECK_OK(runCall(*e, call));
    }
    for (size_t i = 0; i < kCount; ++i)
      TT_CHECK(out[i] == static_cast<float>(i % 13), "rank %d element %zu: %g", rank, i,
               static_cast<double>(out[i]));
    for (void* h : handles) TT_CHECK_OK(e->deregisterBuffer(h));
    // The engines keep working after the race.
    CollCase next{Collective::kAllReduce, "ring", tsrFloat32, RedKind::kSum, kCount, 0, false, 3};
    return runAndCheck(*e, rank, 3, next);
  });
  test::expectAllRanksOk(results);
}

// 50 zero-copy calls, each on freshly allocated and registered buffers (runAndCheck deregisters
// and frees them): the peer must drop each pair with the next handshake, so only the last pair
// stays mapped.
TEST(ExecZeroCopyImports, DeregisteredBuffersAreUnmappedByPeers) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "4096");
  std::string family = zeroCopyAllReduce(2);
  if (family.empty()) GTEST_SKIP() << "no family has a zero-copy allreduce for 2 ranks";
  auto results = test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    int before = userMappings();
    for (int i = 0; i < 50; ++i) {
      CollCase c{Collective::kAllReduce, family, tsrFloat32, RedKind::kSum, 3000, 0, false, i};
      c.registerBuffers = true;
      c.sharedAlloc = true;
      std::string described;
      std::string err = runAndCheck(*e, ctx.rank(), 2, c, &described);
      if (!err.empty()) return err;
      TT_CHECK(described.find("zero-copy") != std::string::npos, "call %d ran %s", i,
               described.c_str());
    }
    auto* impl = dynamic_cast<EngineImpl*>(e.get());
    TT_CHECK(impl != nullptr, "the engine is not an EngineImpl");
    int peer = 1 - ctx.rank();
    TT_CHECK(impl->peerBlobCount(peer) <= 2, "%zu blobs of the peer kept",
             impl->peerBlobCount(peer));
    TT_CHECK(impl->sentIdCount(peer) <= 2, "%zu ids remembered as sent", impl->sentIdCount(peer));
    int after = userMappings();
    TT_CHECK(after <= before + 2, "%d user mappings before, %d after 50 calls", before, after);
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// More live registrations than the caches keep: the least recently used are evicted on both
// sides alike, and a buffer evicted earlier works again (its blob is sent anew).
TEST(ExecZeroCopyImports, CachesStayBoundedAndEvictedBuffersComeBack) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "1024");
  std::string family = zeroCopyAllReduce(2);
  if (family.empty()) GTEST_SKIP() << "no family has a zero-copy allreduce for 2 ranks";
  constexpr size_t kCount = 512;
  constexpr size_t kBuffers = kMaxPeerBlobs + 6;
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    int rank = ctx.rank();
    std::vector<std::vector<float>> bufs(kBuffers, std::vector<float>(kCount));
    std::vector<void*> handles(kBuffers);
    for (size_t b = 0; b < kBuffers; ++b)
      TT_CHECK_OK(e->registerBuffer(bufs[b].data(), kCount * sizeof(float), &handles[b]));
    std::vector<size_t> order;
    for (size_t b = 0; b < kBuffers; ++b) order.push_back(b);
    for (size_t b = 0; b < 6; ++b) order.push_back(b);  // evicted by now
    for (size_t b : order) {
      std::vector<float>& v = bufs[b];
      for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<float>(rank + 1 + (i + b) % 5);
      CollCall call;
      call.sendbuf = v.data();
      call.recvbuf = v.data();
      call.count = kCount;
      call.algorithm = family;
      std::unique_ptr<Operation> op;
      TT_CHECK_OK(e->start(call, &op));
      TT_CHECK_OK(runOperations({op.get()}, 20));
      TT_CHECK(op->describe().find("zero-copy") != std::string::npos, "buffer %zu ran %s", b,
               op->describe().c_str());
      for (size_t i = 0; i < kCount; ++i)
        TT_CHECK(v[i] == static_cast<float>(3 + 2 * ((i + b) % 5)), "buffer %zu element %zu: %g", b,
                 i, static_cast<double>(v[i]));
    }
    auto* impl = dynamic_cast<EngineImpl*>(e.get());
    TT_CHECK(impl != nullptr, "the engine is not an EngineImpl");
    int peer = 1 - rank;
    TT_CHECK(impl->peerBlobCount(peer) == kMaxPeerBlobs, "%zu blobs of the peer kept",
             impl->peerBlobCount(peer));
    TT_CHECK(impl->sentIdCount(peer) == kMaxPeerBlobs, "%zu ids remembered as sent",
             impl->sentIdCount(peer));
    for (void* h : handles) TT_CHECK_OK(e->deregisterBuffer(h));
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::exectest
