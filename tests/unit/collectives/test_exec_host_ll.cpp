// The host LL protocol (host_ll.cpp): all-reduce, all-gather and reduce-scatter with data and flag
// in one cache line. Every op and datatype, in and out of place, at sizes around the 56-byte line
// payload and up to the protocol's largest message, on thread ranks (inproc) and processes (shm),
// many calls in a row (the two parities of the inboxes) mixed with Simple calls, and with waits
// that park at once; each checked against the serial reference, and each call says which protocol
// ran.
#include <gtest/gtest.h>

#include "core/park.hpp"
#include "support/harness.hpp"
#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

const Collective kColls[] = {Collective::kAllReduce, Collective::kAllGather,
                             Collective::kReduceScatter};

// Every case of `coll` at `counts`; `ll`: whether each call must have run LL.
std::string cases(CollectiveEngine& e, int rank, int n, const std::vector<size_t>& counts, bool ll,
                  int salt) {
  for (Collective coll : kColls) {
    for (size_t count : counts) {
      for (tsrDataType_t dtype : {tsrFloat32, tsrInt32}) {
        for (RedKind op : {RedKind::kSum, RedKind::kProd, RedKind::kMax, RedKind::kMin,
                           RedKind::kAvg, RedKind::kPreMulSum}) {
          if (coll == Collective::kAllGather && op != RedKind::kSum) continue;
          if (dtype == tsrInt32 && (op == RedKind::kAvg || op == RedKind::kPreMulSum)) continue;
          for (bool inPlace : {false, true}) {
            CollCase c{coll, "", dtype, op, count, 0, inPlace, salt++};
            std::string described;
            std::string err = runAndCheck(e, rank, n, c, &described);
            if (!err.empty()) return err;
            bool ran = described.find(" LL ") != std::string::npos;
            TT_CHECK(ran == ll, "%s: %s ran %s", caseName(c, n).c_str(), described.c_str(),
                     ran ? "LL" : "Simple");
          }
        }
      }
    }
  }
  return "";
}

std::string body(TransportContext& ctx) {
  const int n = ctx.nranks(), me = ctx.rank();
  std::unique_ptr<CollectiveEngine> e;
  TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
  // Forced (TESSERA_PROTO=LL): around a line (14 floats = 56 bytes) and up to 16 KiB a message.
  std::string err = cases(*e, me, n, {1, 13, 14, 15, 29, 333, 4096}, true, 1);
  if (!err.empty()) return err;
  // Larger messages than LL carries run Simple, between LL calls that keep counting.
  err = cases(*e, me, n, {4097, 20000}, false, 100);
  if (!err.empty()) return err;
  return cases(*e, me, n, {2, 7}, true, 200);
}

class ExecHostLL : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = waitSettings(); }
  void TearDown() override { setWaitSettingsForTest(saved_); }
  WaitSettings saved_;
};

TEST_F(ExecHostLL, ThreadRanks) {
  test::ScopedEnv proto("TESSERA_PROTO", "LL");
  for (int n : {2, 3, 4})
    test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, n, body));
}

TEST_F(ExecHostLL, ProcessRanks) {
  test::ScopedEnv proto("TESSERA_PROTO", "LL");
  for (int n : {2, 3})
    test::expectAllRanksOk(test::runTransportRanks(RankMode::kProcesses, n, body));
}

TEST_F(ExecHostLL, WaitsThatParkAtOnce) {
  test::ScopedEnv proto("TESSERA_PROTO", "LL");
  WaitSettings s;
  s.spinNs = 0;
  setWaitSettingsForTest(s);
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 4, body));
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kProcesses, 2, body));
}

// By default LL carries calls that move at most 4 KiB: nccl-tests' size (all-gather and
// reduce-scatter: n blocks) and the bytes each rank receives ((n-1) messages: a whole buffer for
// all-reduce, a block for the others); TESSERA_PROTO=Simple never, nor TESSERA_ALGO=<family>.
TEST_F(ExecHostLL, DefaultAndSimpleOnly) {
  // 2 ranks: float counts up to 1024 for all-reduce, 512 for the others; 512 is the edge of both.
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    std::string err = cases(*e, ctx.rank(), 2, {1, 32, 512}, true, 1);
    if (!err.empty()) return err;
    return cases(*e, ctx.rank(), 2, {1025, 3000}, false, 50);
  }));
  // 4 ranks: all-reduce up to 341 floats (3 x 1364 B received), the others up to 256 (4 KiB).
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 4, [](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    std::string err = cases(*e, ctx.rank(), 4, {1, 256}, true, 1);
    if (!err.empty()) return err;
    return cases(*e, ctx.rank(), 4, {342, 1000}, false, 50);
  }));
  auto simpleOnly = [](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    return cases(*e, ctx.rank(), 2, {1, 32}, false, 1);
  };
  {
    // TESSERA_ALGO names the families to run; LL is none of them (unless TESSERA_PROTO=LL).
    test::ScopedEnv algo("TESSERA_ALGO", "ring");
    test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 2, simpleOnly));
    test::ScopedEnv proto("TESSERA_PROTO", "LL");
    test::expectAllRanksOk(
        test::runTransportRanks(RankMode::kThreads, 2, [](TransportContext& ctx) {
          std::unique_ptr<CollectiveEngine> e;
          TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
          return cases(*e, ctx.rank(), 2, {1, 32}, true, 1);
        }));
  }
  test::ScopedEnv proto("TESSERA_PROTO", "Simple");
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 2, simpleOnly));
}

}  // namespace
}  // namespace tessera::exectest
