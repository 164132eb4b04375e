// Ranks agree on their tuner before the first tuned call (EngineImpl::agreeTuner): tuner files
// that differ (two hosts' cached files) make every rank fall back to the built-in parameters, and
// the call is right; the same file on every rank is kept; filters that differ (TESSERA_ALGO) are
// an error on every rank, never a hang on mismatched plans.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "support/harness.hpp"
#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

std::string fileFor(int which) {
  std::string path = strprintf("/tmp/tessera_agree_%d_%d.json", static_cast<int>(getpid()), which);
  std::ofstream(path) << strprintf(R"({"links": {"shm": {"alphaUs": %d, "betaGBs": 7}}})",
                                   1 + which);
  return path;
}

TEST(ExecTunerAgreement, DifferentFilesFallBackToTheBuiltInParameters) {
  std::string a = fileFor(0), b = fileFor(1);
  for (bool same : {false, true}) {
    test::expectAllRanksOk(
        test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
          std::string mine = same || ctx.rank() == 0 ? a : b;
          setenv("TESSERA_TUNER_FILE", mine.c_str(), 1);
          std::unique_ptr<CollectiveEngine> e;
          TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
          CollCase c{Collective::kAllReduce, "", tsrFloat32, RedKind::kSum, 5000, 0, false, 1};
          std::string err = runAndCheck(*e, ctx.rank(), ctx.nranks(), c);
          if (!err.empty()) return err;
          const std::string& source = e->tuner().source();
          if (same)
            TT_CHECK(source == mine, "with one file the tuner says its parameters come from %s",
                     source.c_str());
          else
            TT_CHECK(source == "built-in defaults", "with two files the tuner kept %s",
                     source.c_str());
          return std::string();
        }));
  }
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(ExecTunerAgreement, DifferentFiltersAreAnErrorOnEveryRank) {
  test::expectAllRanksOk(
      test::runTransportRanks(RankMode::kProcesses, 2, [](TransportContext& ctx) {
        if (ctx.rank() == 0) setenv("TESSERA_ALGO", "ring", 1);
        std::unique_ptr<CollectiveEngine> e;
        TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
        std::vector<float> in(100, 1.0f), out(100);
        CollCall call;
        call.sendbuf = in.data();
        call.recvbuf = out.data();
        call.count = in.size();
        Result r = runCall(*e, call);
        TT_CHECK(r == tsrInvalidUsage, "the call gave %s", resultName(r));
        TT_CHECK(std::string(lastErrorMessage()).find("TESSERA_ALGO") != std::string::npos,
                 "sentence: %s", lastErrorMessage());
        return std::string();
      }));
}

}  // namespace
}  // namespace tessera::exectest
