// Sends and receives of the engine (startP2P): every rank sends several messages to every rank
// (itself included) and receives theirs, with the calls of a group in a random order per rank;
// messages of 0 bytes, of a few bytes and of several slots; threads and processes.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "core/datatype.hpp"
#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

const size_t kCounts[] = {0, 3, 50000};  // int32: the last one spans several 64 KiB slots

int32_t valueOf(int from, int to, size_t k, size_t i) {
  return static_cast<int32_t>(from * 1000003 + to * 1009 + static_cast<int>(k) * 31 +
                              static_cast<int>(i));
}

// Each rank: for every peer (itself too) the sends of kCounts in order and the receives of
// kCounts in order, merged at random; then checks what arrived.
std::string exchange(CollectiveEngine& e, int rank, int n, uint32_t seed) {
  std::vector<std::vector<int32_t>> out, in;
  std::vector<std::vector<P2PCall>> queues;  // one per (peer, direction), in order
  for (int p = 0; p < n; ++p) {
    std::vector<P2PCall> sends, recvs;
    for (size_t k = 0; k < std::size(kCounts); ++k) {
      size_t c = kCounts[k];
      out.emplace_back(c);
      for (size_t i = 0; i < c; ++i) out.back()[i] = valueOf(rank, p, k, i);
      in.emplace_back(c + 1, -7);
      P2PCall s{true, p, out.back().data(), nullptr, c, tsrInt32};
      P2PCall r{false, p, nullptr, in.back().data(), c, tsrInt32};
      sends.push_back(s);
      recvs.push_back(r);
    }
    queues.push_back(sends);
    queues.push_back(recvs);
  }
  std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(rank));
  std::vector<P2PCall> calls;
  std::vector<size_t> at(queues.size(), 0);
  for (size_t left = queues.size() * std::size(kCounts); left > 0; --left) {
    size_t q;
    do q = rng() % queues.size();
    while (at[q] == queues[q].size());
    calls.push_back(queues[q][at[q]++]);
  }
  TT_CHECK_OK(runP2P(e, calls, 30));
  size_t idx = 0;
  for (int p = 0; p < n; ++p) {
    for (size_t k = 0; k < std::size(kCounts); ++k, ++idx) {
      const std::vector<int32_t>& got = in[idx];
      for (size_t i = 0; i < kCounts[k]; ++i)
        TT_CHECK(got[i] == valueOf(p, rank, k, i), "message %zu from rank %d element %zu: %d", k, p,
                 i, got[i]);
      TT_CHECK(got[kCounts[k]] == -7, "message %zu from rank %d wrote past its end", k, p);
    }
  }
  return "";
}

TEST(ExecP2P, AllPairsAnyOrderThreads) {
  for (int n : {1, 2, 4}) {
    auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
      // Twice: slot counters carry over from one group to the next.
      for (uint32_t round = 1; round <= 2; ++round) {
        std::string err = exchange(*e, ctx.rank(), n, round);
        if (!err.empty()) return err;
      }
      return std::string();
    });
    test::expectAllRanksOk(results);
  }
}

TEST(ExecP2P, AllPairsAnyOrderProcesses) {
  auto results = test::runTransportRanks(RankMode::kProcesses, 3, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    for (uint32_t round = 1; round <= 2; ++round) {
      std::string err = exchange(*e, ctx.rank(), 3, round);
      if (!err.empty()) return err;
    }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(ExecP2P, SizeMismatchIsReported) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    std::vector<int32_t> buf(16, 1);
    if (ctx.rank() == 0) {
      // The send completes on credit alone; stay until the receiver is done with the link.
      TT_CHECK_OK(runP2P(*e, {P2PCall{true, 1, buf.data(), nullptr, 10, tsrInt32}}));
      TT_CHECK_OK(ctx.bootstrap().barrier());
      return std::string();
    }
    Result r = runP2P(*e, {P2PCall{false, 0, nullptr, buf.data(), 12, tsrInt32}});
    TT_CHECK_OK(ctx.bootstrap().barrier());
    TT_CHECK(r == tsrInvalidUsage, "got %s", resultName(r));
    std::string msg = lastErrorMessage();
    TT_CHECK(msg.find("receives 48 bytes from rank 0, which sends 40 bytes") != std::string::npos,
             "sentence: %s", msg.c_str());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(ExecP2P, UnmatchedSendToSelfIsRefused) {
  auto results = test::runTransportRanks(RankMode::kThreads, 1, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    int32_t v = 1;
    std::unique_ptr<Operation> op;
    Result r = e->startP2P({P2PCall{true, 0, &v, nullptr, 1, tsrInt32}}, &op);
    TT_CHECK(r == tsrInvalidUsage, "got %s", resultName(r));
    // Nothing was queued: the engine goes on.
    int32_t w = 0;
    TT_CHECK_OK(runP2P(*e, {P2PCall{false, 0, nullptr, &w, 1, tsrInt32},
                            P2PCall{true, 0, &v, nullptr, 1, tsrInt32}}));
    TT_CHECK(w == 1, "self receive got %d", w);
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// A send/recv group that fails in its turn (here a receive from a rank that never sends, at the
// engine's deadline) hands the turn on: the group queued behind it runs instead of waiting for
// its caller's deadline behind an operation that will never finish.
TEST(ExecP2P, AFailedGroupHandsItsTurnOn) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    EngineSetup setup;
    setup.timeoutSeconds = 0.5;
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, setup, &e));
    // One message first, so the link exists (making it takes both ranks).
    int32_t one = 1;
    TT_CHECK_OK(runP2P(*e, {P2PCall{ctx.rank() == 0, 1 - ctx.rank(), &one, &one, 1, tsrInt32}}));
    if (ctx.rank() == 1) {
      int32_t never = 0, v = 5, w = 0;
      std::unique_ptr<Operation> first, second;
      TT_CHECK_OK(e->startP2P({P2PCall{false, 0, nullptr, &never, 1, tsrInt32}}, &first));
      TT_CHECK_OK(e->startP2P(
          {P2PCall{false, 1, nullptr, &w, 1, tsrInt32}, P2PCall{true, 1, &v, nullptr, 1, tsrInt32}},
          &second));
      Result r = runOperation(first.get(), 10);
      TT_CHECK(r == tsrTimeout, "the receive nobody sends: %s", resultName(r));
      auto t0 = std::chrono::steady_clock::now();
      r = runOperation(second.get(), 5);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      TT_CHECK(r == tsrSuccess, "the group behind it: %s (%s) after %.2f s", resultName(r),
               lastErrorMessage(), s);
      TT_CHECK(w == 5, "self receive got %d", w);
      TT_CHECK(s < 2, "the group behind it took %.2f s", s);
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::exectest
