// The tuner's measured table (tuner_table.hpp) and where it comes from: the choice follows the
// family measured fastest at the nearest measured size, within what TESSERA_ALGO and
// TESSERA_DETERMINISTIC allow, and the model keeps everything the table does not cover; the file
// round-trips through JSON; communicators read this host's cached file (XDG_CACHE_HOME) unless
// TESSERA_TUNER_FILE or TESSERA_TUNER_CACHE=0 say otherwise, and ignore a broken cached file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "collectives/tuner/tuner.hpp"
#include "core/build_config.hpp"
#include "support/harness.hpp"

namespace tessera {
namespace {

MeasuredPoint point(uint64_t bytes, std::initializer_list<std::pair<const char*, double>> us) {
  MeasuredPoint p;
  p.bytes = bytes;
  for (const auto& [f, t] : us) p.families.push_back(MeasuredFamily{f, t});
  return p;
}

// allreduce on 2 shm ranks: oneshot fastest small, twoshot at 64 KiB, rhd at 1 MiB, ring large.
std::shared_ptr<MeasuredTable> table() {
  auto t = std::make_shared<MeasuredTable>();
  MeasuredSet s;
  s.collective = Collective::kAllReduce;
  s.nranks = 2;
  s.transport = TransportKind::kShm;
  s.points.push_back(point(8, {{"oneshot", 0.3}, {"ring", 0.9}, {"twoshot", 0.5}}));
  s.points.push_back(point(65536, {{"oneshot", 9}, {"ring", 8}, {"twoshot", 6}}));
  s.points.push_back(point(1 << 20, {{"ring", 60}, {"rhd", 50}, {"tree", 70}}));
  s.points.push_back(point(64 << 20, {{"ring", 5000}, {"rhd", 7000}, {"twoshot", 5500}}));
  t->sets.push_back(s);
  return t;
}

TuneInput input(uint64_t bytes, int n = 2) {
  TuneInput in;
  in.collective = Collective::kAllReduce;
  in.bytes = bytes;
  in.nranks = n;
  in.intraHost = TransportKind::kShm;
  return in;
}

AlgoFilter filterOf(const std::string& v) {
  AlgoFilter f;
  EXPECT_EQ(parseAlgoFilter(v, &f), tsrSuccess);
  return f;
}

std::string choose(const Tuner& t, const TuneInput& in, bool* measured = nullptr) {
  TuneChoice c;
  EXPECT_EQ(t.choose(in, &c), tsrSuccess) << lastErrorMessage();
  if (measured != nullptr) *measured = c.measured;
  return c.algorithm;
}

TEST(MeasuredTable, NearestPointOnALogScale) {
  auto t = table();
  const MeasuredSet& s = t->sets[0];
  EXPECT_EQ(nearestPoint(s, 1)->bytes, 8u);
  EXPECT_EQ(nearestPoint(s, 8)->bytes, 8u);
  EXPECT_EQ(nearestPoint(s, 512)->bytes, 8u);              // 2^9: 6 from 2^3, 7 from 2^16
  EXPECT_EQ(nearestPoint(s, 1024)->bytes, 65536u);         // 2^10: 7 and 6
  EXPECT_EQ(nearestPoint(s, 256 << 10)->bytes, 1u << 20);  // 2^18: 2 and 2, the larger
  EXPECT_EQ(nearestPoint(s, uint64_t{1} << 40)->bytes, 64u << 20);
  EXPECT_EQ(t->find(Collective::kAllReduce, 4, TransportKind::kShm), nullptr);
  EXPECT_EQ(t->find(Collective::kAllReduce, 2, TransportKind::kInproc), nullptr);
}

TEST(MeasuredTable, TheChoiceFollowsTheMeasurements) {
  Tuner t(defaultTunerParams(), table(), AlgoFilter{});
  bool measured = false;
  EXPECT_EQ(choose(t, input(8), &measured), "oneshot");
  EXPECT_TRUE(measured);
  EXPECT_EQ(choose(t, input(70000)), "twoshot");
  EXPECT_EQ(choose(t, input(1 << 20)), "rhd");
  EXPECT_EQ(choose(t, input(256 << 20)), "ring");
  TuneChoice c;
  ASSERT_EQ(t.choose(input(1 << 20), &c), tsrSuccess);
  EXPECT_DOUBLE_EQ(c.predictedUs, 50.0) << "the prediction is the measurement";
}

TEST(MeasuredTable, FiltersStillApply) {
  // rhd is fastest at 1 MiB; without it, ring (60) beats tree (70).
  Tuner noRhd(defaultTunerParams(), table(), filterOf("^rhd"));
  EXPECT_EQ(choose(noRhd, input(1 << 20)), "ring");
  // Deterministic: only canonical-order families (oneshot, twoshot) among the measured ones.
  Tuner det(defaultTunerParams(), table(), AlgoFilter{});
  TuneInput in = input(8);
  in.deterministic = true;
  EXPECT_EQ(choose(det, in), "oneshot");
  in.bytes = 64 << 20;
  EXPECT_EQ(choose(det, in), "twoshot");
  // Nothing measured is allowed at that size: the model chooses among the allowed.
  Tuner onlyTree(defaultTunerParams(), table(), filterOf("tree"));
  bool measured = true;
  EXPECT_EQ(choose(onlyTree, input(8), &measured), "tree");
  EXPECT_FALSE(measured);
}

TEST(MeasuredTable, TheModelKeepsWhatTheTableDoesNotCover) {
  Tuner with(defaultTunerParams(), table(), AlgoFilter{});
  Tuner without(defaultTunerParams(), AlgoFilter{});
  bool measured = true;
  TuneInput in = input(8, 4);  // 4 ranks were not measured
  EXPECT_EQ(choose(with, in, &measured), choose(without, in));
  EXPECT_FALSE(measured);
  in = input(8);
  in.zeroCopyPossible = true;  // the table measured staged plans
  EXPECT_EQ(choose(with, in, &measured), choose(without, in));
  EXPECT_FALSE(measured);
  in = input(8, 2);
  in.hostOf = {0, 1};  // two hosts
  in.interHost = TransportKind::kUcx;
  EXPECT_EQ(choose(with, in, &measured), choose(without, in));
  EXPECT_FALSE(measured);
  in = input(8);
  in.intraHost = TransportKind::kInproc;  // another transport
  EXPECT_EQ(choose(with, in, &measured), choose(without, in));
  EXPECT_FALSE(measured);
}

// tessera_tune --device measures device calls over p2p: those sets steer device calls over p2p
// (and cuda_ipc) only, host sets host calls only; the device emulation (host transports) reads
// neither.
TEST(MeasuredTable, DeviceSetsSteerDeviceCallsOnly) {
  auto t = table();
  MeasuredSet dev = t->sets[0];
  dev.transport = TransportKind::kP2p;
  dev.points = {point(1 << 20, {{"tree", 40}, {"ring", 90}, {"rhd", 95}})};
  t->sets.push_back(dev);
  Tuner with(defaultTunerParams(), t, AlgoFilter{});
  Tuner without(defaultTunerParams(), AlgoFilter{});
  TuneInput gpu = input(1 << 20);
  gpu.deviceExecutor = true;
  gpu.intraHost = TransportKind::kP2p;
  gpu.workers = 8;
  bool measured = false;
  EXPECT_EQ(choose(with, gpu, &measured), "tree");
  EXPECT_TRUE(measured);
  TuneInput ipc = gpu;  // processes of a host: the same GPUs' links
  ipc.intraHost = TransportKind::kCudaIpc;
  EXPECT_EQ(choose(with, ipc, &measured), choose(without, ipc));
  EXPECT_FALSE(measured) << "no cuda_ipc set was measured";
  EXPECT_EQ(choose(with, input(1 << 20), &measured), "rhd") << "the host set still decides";
  EXPECT_TRUE(measured);
  TuneInput emulated = gpu;
  emulated.intraHost = TransportKind::kShm;  // the device executor on host threads
  EXPECT_EQ(choose(with, emulated, &measured), choose(without, emulated));
  EXPECT_FALSE(measured) << "host times do not stand for device calls";
  TuneInput windows = gpu;
  windows.zeroCopyPossible = true;  // the table measured staged calls
  EXPECT_EQ(choose(with, windows, &measured), choose(without, windows));
  EXPECT_FALSE(measured);
}

#if TESSERA_HAVE_JSON
TEST(MeasuredTable, TheFileRoundTrips) {
  TunerParams p = defaultTunerParams();
  p.links[static_cast<size_t>(TransportKind::kShm)] = LinkModel{0.7, 11.5};
  p.crossMemory = LinkModel{1.5, 6.25};
  p.gammaGBs = 9;
  p.deviceGammaGBs = 700;
  p.deviceCopyGBs = 900;
  p.deviceNet = LinkModel{7.5, 25};
  p.devicePcie = LinkModel{4.5, 20};
  auto t = table();
  std::string text = tunerFileToJson(p, *t, "tessera_tune 0.1.0", "vm", "2026-12-01T00:00:00Z");
  TunerParams q = defaultTunerParams();
  MeasuredTable u;
  ASSERT_EQ(tunerFileFromJson(text, &q, &u), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(q.links[static_cast<size_t>(TransportKind::kShm)].betaGBs, 11.5);
  EXPECT_EQ(q.crossMemory.alphaUs, 1.5);
  EXPECT_EQ(q.gammaGBs, 9);
  EXPECT_EQ(q.deviceGammaGBs, 700);
  EXPECT_EQ(q.deviceCopyGBs, 900);
  EXPECT_EQ(q.deviceNet.alphaUs, 7.5);
  EXPECT_EQ(q.deviceNet.betaGBs, 25);
  EXPECT_EQ(q.devicePcie.alphaUs, 4.5);
  EXPECT_EQ(q.devicePcie.betaGBs, 20);
  EXPECT_EQ(u.digest(), t->digest());
  ASSERT_EQ(u.sets.size(), 1u);
  EXPECT_EQ(u.sets[0].points.size(), 4u);
}

class TunerCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera_cache_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    xdg_ = std::make_unique<test::ScopedEnv>("XDG_CACHE_HOME", dir_.c_str());
    cache_ = std::make_unique<test::ScopedEnv>("TESSERA_TUNER_CACHE", "1");
    file_ = std::make_unique<test::ScopedEnv>("TESSERA_TUNER_FILE", nullptr);
    path_ = tunerCachePath();
    ASSERT_EQ(path_.rfind(dir_ + "/tessera/tuner-", 0), 0u) << path_;
    mkdir((dir_ + "/tessera").c_str(), 0755);
  }
  void TearDown() override {
    std::remove(path_.c_str());
    rmdir((dir_ + "/tessera").c_str());
    rmdir(dir_.c_str());
  }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  std::string dir_, path_;
  std::unique_ptr<test::ScopedEnv> xdg_, cache_, file_;
};

TEST_F(TunerCache, CommunicatorsReadThisHostsFile) {
  Tuner none;
  ASSERT_EQ(Tuner::fromEnv(&none), tsrSuccess);
  EXPECT_EQ(none.source(), "built-in defaults") << "no file yet";
  write(tunerFileToJson(defaultTunerParams(), *table(), "test", "vm", "now"));
  Tuner t;
  ASSERT_EQ(Tuner::fromEnv(&t), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(t.source(), path_);
  ASSERT_NE(t.table(), nullptr);
  EXPECT_EQ(choose(t, input(1 << 20)), "rhd");
  test::ScopedEnv off("TESSERA_TUNER_CACHE", "0");
  Tuner ignored;
  ASSERT_EQ(Tuner::fromEnv(&ignored), tsrSuccess);
  EXPECT_EQ(ignored.table(), nullptr);
  EXPECT_EQ(ignored.source(), "built-in defaults");
}

TEST_F(TunerCache, ABrokenCachedFileIsIgnoredAndAnExplicitOneIsAnError) {
  write("{\"links\": ");
  Tuner t;
  ASSERT_EQ(Tuner::fromEnv(&t), tsrSuccess) << "a broken cache must not stop communicators";
  EXPECT_EQ(t.source(), "built-in defaults");
  test::ScopedEnv explicitFile("TESSERA_TUNER_FILE", path_.c_str());
  Tuner u;
  EXPECT_EQ(Tuner::fromEnv(&u), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find(path_), std::string::npos) << lastErrorMessage();
}

TEST_F(TunerCache, TheDigestsTellFilesAndFiltersApart) {
  Tuner a(defaultTunerParams(), table(), AlgoFilter{});
  Tuner b(defaultTunerParams(), AlgoFilter{});
  Tuner c(defaultTunerParams(), table(), filterOf("ring"));
  EXPECT_NE(a.fileDigest(), b.fileDigest());
  EXPECT_EQ(a.fileDigest(), c.fileDigest());
  EXPECT_NE(a.filterDigest(), c.filterDigest());
  a.useDefaults();
  EXPECT_EQ(a.fileDigest(), b.fileDigest());
  EXPECT_EQ(a.table(), nullptr);
}
// The tool itself, briefly: two processes, all-reduce from 8 B to 64 KiB, one round.
TEST(TesseraTune, WritesAFileTheTunerReads) {
  std::string out = strprintf("/tmp/tessera_tune_test_%d.json", static_cast<int>(getpid()));
  std::string cmd = strprintf(
      "timeout 120 %s/src/tools/tessera_tune -n 2 -c allreduce,allgather -b 8 -e 64K -f 16 -r 1 "
      "-m 2 -o %s > %s.log 2>&1",
      TESSERA_BINARY_DIR, out.c_str(), out.c_str());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << out << ".log";
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  TunerParams p = defaultTunerParams();
  MeasuredTable t;
  ASSERT_EQ(tunerFileFromJson(text.str(), &p, &t), tsrSuccess) << lastErrorMessage();
  const MeasuredSet* s = t.find(Collective::kAllReduce, 2, TransportKind::kShm);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->points.size(), 5u);  // 8, 128, 2 KiB, 32 KiB and 64 KiB (the end of the ladder)
  EXPECT_EQ(s->points[0].bytes, 8u);
  EXPECT_GE(s->points[0].families.size(), 4u) << "every family that generates it was measured";
  ASSERT_NE(t.find(Collective::kAllGather, 2, TransportKind::kShm), nullptr);
  EXPECT_GT(p.links[static_cast<size_t>(TransportKind::kShm)].betaGBs, 0.1);
  EXPECT_GT(p.gammaGBs, 0.1);
  // The tuner follows it.
  Tuner tuner(p, std::make_shared<MeasuredTable>(t), AlgoFilter{});
  TuneChoice c;
  TuneInput in = input(8);
  ASSERT_EQ(tuner.choose(in, &c), tsrSuccess);
  EXPECT_TRUE(c.measured);
  std::remove(out.c_str());
  std::remove((out + ".log").c_str());
}

// --device without a usable GPU (none visible, on any machine): exit 1 with a sentence, and the
// file is left as it was.
TEST(TesseraTune, DeviceWithoutAGpuSaysSoAndLeavesTheFile) {
  std::string out = strprintf("/tmp/tessera_tune_dev_%d.json", static_cast<int>(getpid()));
  const std::string before = tunerFileToJson(defaultTunerParams(), *table(), "test", "vm", "");
  std::ofstream(out) << before;
  std::string cmd = strprintf(
      "CUDA_VISIBLE_DEVICES= timeout 120 %s/src/tools/tessera_tune --device -n 2 -c allreduce "
      "-b 8 -e 64K -o %s > %s.log 2>&1",
      TESSERA_BINARY_DIR, out.c_str(), out.c_str());
  int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  std::ifstream log(out + ".log");
  std::stringstream said;
  said << log.rdbuf();
  EXPECT_NE(said.str().find("GPU 0"), std::string::npos) << said.str();
  std::ifstream f(out);
  std::stringstream after;
  after << f.rdbuf();
  EXPECT_EQ(after.str(), before);
  std::remove(out.c_str());
  std::remove((out + ".log").c_str());
}
#endif

}  // namespace
}  // namespace tessera
