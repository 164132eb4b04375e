// The collective engine over thread ranks (inproc): every family that generates and verifies,
// every collective it generates, 1..5 ranks, counts from 0 to several scratch slices, in and out
// of place, float32 and int32, against a serial reference.
#include <gtest/gtest.h>

#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

// 40000 elements of 4 bytes with a 64 KiB scratch: several slices for every family with scratch.
const size_t kCounts[] = {0, 1, 7, 1000, 40000};

std::vector<int> twoHosts(int n) {
  std::vector<int> h(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) h[static_cast<size_t>(r)] = r * 2 / n;
  return h;
}

class ExecFamilies : public ::testing::TestWithParam<int> {};

TEST_P(ExecFamilies, EveryCollectiveMatchesTheReference) {
  int n = GetParam();
  std::vector<std::string> skipped;
  EngineSetup setup;
  setup.hostOf = twoHosts(n);
  std::vector<Usable> plans = usablePlans(n, setup.hostOf, &skipped);
  for (const std::string& s : skipped) std::cout << "[ skipped  ] " << s << "\n";
  bool ring = false;
  for (const Usable& u : plans) ring = ring || u.family == "ring";
  ASSERT_TRUE(ring || n == 1) << "the ring family must be usable";
  auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, setup, &e));
    for (const Usable& u : plans) {
      for (tsrDataType_t dtype : {tsrFloat32, tsrInt32}) {
        for (size_t count : kCounts) {
          for (bool inPlace : {false, true}) {
            if (inPlace && u.coll == Collective::kAllToAll) continue;
            CollCase c;
            c.coll = u.coll;
            c.algorithm = u.family;
            c.root = u.root;
            c.dtype = dtype;
            c.count = count;
            c.inPlace = inPlace;
            c.salt = static_cast<int>(count % 5);
            std::string err = runAndCheck(*e, ctx.rank(), n, c);
            if (!err.empty()) return err;
          }
        }
      }
    }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ExecFamilies, ::testing::Values(1, 2, 3, 4, 5));

// Every reduction op (the pre-op on input loads, the post-op per slice) through the families
// that reduce, and the tuner's own choice.
TEST(ExecOps, EveryOpOnThreeRanks) {
  const int n = 3;
  std::vector<std::string> skipped;
  EngineSetup setup;
  std::vector<Usable> plans = usablePlans(n, setup.hostOf, &skipped);
  auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, setup, &e));
    for (RedKind op :
         {RedKind::kProd, RedKind::kMax, RedKind::kMin, RedKind::kAvg, RedKind::kPreMulSum}) {
      for (const Usable& u : plans) {
        if (!collectiveReduces(u.coll)) continue;
        for (tsrDataType_t dtype : {tsrFloat32, tsrInt32}) {
          for (size_t count : {size_t{7}, size_t{40000}}) {
            for (bool inPlace : {false, true}) {
              CollCase c{u.coll, u.family, dtype, op, count, u.root, inPlace, 3};
              std::string err = runAndCheck(*e, ctx.rank(), n, c);
              if (!err.empty()) return err;
            }
          }
        }
      }
    }
    // The tuner's choice for a range of sizes.
    for (Collective coll :
         {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
          Collective::kBroadcast, Collective::kReduce, Collective::kAllToAll}) {
      for (size_t count : {size_t{1}, size_t{1000}, size_t{100000}}) {
        CollCase c{coll, "", tsrFloat32, RedKind::kSum, count, 1, false, 1};
        std::string err = runAndCheck(*e, ctx.rank(), n, c);
        if (!err.empty()) return err;
      }
    }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Calls are matched in start order: several operations started before any progresses (a group)
// complete, each with its own result.
TEST(ExecOrder, OperationsStartedTogetherRunInOrder) {
  const int n = 4;
  auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    const size_t count = 5000;
    std::vector<std::vector<float>> in(6, std::vector<float>(count)),
        out(6, std::vector<float>(count));
    std::vector<std::unique_ptr<Operation>> ops;
    std::vector<Operation*> raw;
    for (int k = 0; k < 6; ++k) {
      for (size_t i = 0; i < count; ++i)
        in[static_cast<size_t>(k)][i] =
            static_cast<float>(ctx.rank() + k + static_cast<int>(i % 3));
      CollCall call;
      call.collective = Collective::kAllReduce;
      call.sendbuf = in[static_cast<size_t>(k)].data();
      call.recvbuf = out[static_cast<size_t>(k)].data();
      call.count = count;
      call.algorithm = k % 2 == 0 ? "ring" : "";
      std::unique_ptr<Operation> op;
      TT_CHECK_OK(e->start(call, &op));
      raw.push_back(op.get());
      ops.push_back(std::move(op));
    }
    TT_CHECK_OK(runOperations(raw, 30));
    for (int k = 0; k < 6; ++k)
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += static_cast<float>(r + k + static_cast<int>(i % 3));
        TT_CHECK(out[static_cast<size_t>(k)][i] == want, "call %d element %zu: %g, expected %g", k,
                 i, static_cast<double>(out[static_cast<size_t>(k)][i]), static_cast<double>(want));
      }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::exectest
