// Zero-copy without registration (host_executor.cpp, the handshake's rule): thread ranks reach each
// other's buffers at their own addresses; processes reach them by cross-memory attach where the
// tuner prefers it to staging (forced here with a tuner file whose cross-memory link is fast), and
// stage through the scratch where the kernel refuses it (a seccomp filter) or TESSERA_CMA=0. Every
// result is checked against the serial reference, premulsum (a pre-op on input loads) included,
// and each call says how it reached its peers.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "support/harness.hpp"
#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

// A tuner file that makes cross-memory attach the cheapest way for every large call.
class FastCrossMemory {
 public:
  FastCrossMemory()
      : path_(strprintf("/tmp/tessera_cma_tuner_%d.json", static_cast<int>(getpid()))) {
    std::ofstream(path_) << R"({"crossMemory": {"alphaUs": 0.01, "betaGBs": 100000}})";
    env_ = std::make_unique<test::ScopedEnv>("TESSERA_TUNER_FILE", path_.c_str());
  }
  ~FastCrossMemory() { std::remove(path_.c_str()); }

 private:
  std::string path_;
  std::unique_ptr<test::ScopedEnv> env_;
};

const FamilyColl kCases[] = {
    {"", Collective::kAllGather}, {"", Collective::kBroadcast},     {"", Collective::kAllReduce},
    {"", Collective::kReduce},    {"", Collective::kReduceScatter}, {"", Collective::kAllToAll},
};

// Runs every case at sizes past the zero-copy threshold (256 KiB), checking each result. With
// `reach` set, every allgather, broadcast and allreduce call (families with a zero-copy form)
// must say it reached its peers that way; with "" no call may say it reached them without the
// scratch.
std::string runCases(TransportContext& ctx, const char* reach) {
  const int n = ctx.nranks(), me = ctx.rank();
  std::unique_ptr<CollectiveEngine> e;
  TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
  for (const FamilyColl& fc : kCases) {
    for (size_t count : {size_t{70001}, size_t{300000}}) {
      for (RedKind op : {RedKind::kSum, RedKind::kPreMulSum}) {
        if (op == RedKind::kPreMulSum && !collectiveReduces(fc.coll)) continue;
        for (bool inPlace : {false, true}) {
          if (inPlace && fc.coll == Collective::kAllToAll) continue;
          CollCase c{fc.coll, fc.family, tsrFloat32, op, count, n - 1, inPlace, 3};
          std::string described;
          std::string err = runAndCheck(*e, me, n, c, &described);
          if (!err.empty()) return err;
          bool direct = fc.coll == Collective::kAllGather || fc.coll == Collective::kBroadcast ||
                        fc.coll == Collective::kAllReduce;
          if (reach[0] == '\0')
            TT_CHECK(described.find("cross-memory") == std::string::npos &&
                         described.find("own addresses") == std::string::npos,
                     "%s: %s", caseName(c, n).c_str(), described.c_str());
          else if (direct)
            TT_CHECK(described.find(reach) != std::string::npos, "%s: '%s' lacks '%s'",
                     caseName(c, n).c_str(), described.c_str(), reach);
        }
      }
    }
  }
  return "";
}

TEST(ExecCrossMemory, ThreadRanksReachEachOthersUnregisteredBuffers) {
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 3, [](TransportContext& ctx) {
    return runCases(ctx, "on the peers' own addresses");
  }));
}

TEST(ExecCrossMemory, ProcessesAttachToEachOthersMemory) {
  FastCrossMemory fast;
  for (int n : {2, 3})
    test::expectAllRanksOk(test::runTransportRanks(
        RankMode::kProcesses, n,
        [](TransportContext& ctx) { return runCases(ctx, "by cross-memory attach"); }));
}

TEST(ExecCrossMemory, RefusedByTheKernelTheCallsStage) {
  FastCrossMemory fast;
  test::expectAllRanksOk(
      test::runTransportRanks(RankMode::kProcesses, 3, [](TransportContext& ctx) {
        TT_CHECK(test::denyCrossMemoryForTest(), "installing the seccomp filter failed: %s",
                 std::strerror(errno));
        return runCases(ctx, "");
      }));
}

TEST(ExecCrossMemory, TesseraCmaOffTheCallsStage) {
  FastCrossMemory fast;
  test::ScopedEnv off("TESSERA_CMA", "0");
  test::expectAllRanksOk(test::runTransportRanks(
      RankMode::kProcesses, 2, [](TransportContext& ctx) { return runCases(ctx, ""); }));
}

}  // namespace
}  // namespace tessera::exectest
