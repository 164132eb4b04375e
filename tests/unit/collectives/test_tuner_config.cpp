// The tuner's configuration: TESSERA_TUNER_FILE's JSON (valid and hostile documents),
// Tuner::fromEnv, and the TUNING log line of each choice.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/tuner/tuner.hpp"
#include "core/build_config.hpp"

namespace tessera {
namespace {

// Sets (or with nullptr unsets) an environment variable for the object's life. Local rather
// than support/harness's: that object drags in the CUDA queries, which this test never needs.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

std::string tempPath(const char* what) {
  return "/tmp/tessera_tuner_test." + std::to_string(getpid()) + "." + what;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const LinkModel& link(const TunerParams& p, TransportKind k) {
  return p.links[static_cast<size_t>(k)];
}

TEST(TunerDefaults, EveryTransportHasAPlausibleLink) {
  TunerParams p = defaultTunerParams();
  for (const LinkModel& l : p.links) {
    EXPECT_GT(l.alphaUs, 0);
    EXPECT_GT(l.betaGBs, 0);
  }
  // Host memory within a host is faster and nearer than TCP between hosts.
  EXPECT_LT(link(p, TransportKind::kShm).alphaUs, link(p, TransportKind::kUcx).alphaUs);
  EXPECT_GT(link(p, TransportKind::kShm).betaGBs, link(p, TransportKind::kUcx).betaGBs);
  EXPECT_GT(p.gammaGBs, 0);
}

#if TESSERA_HAVE_JSON

bool sameParams(const TunerParams& a, const TunerParams& b) {
  for (size_t i = 0; i < a.links.size(); ++i)
    if (a.links[i].alphaUs != b.links[i].alphaUs || a.links[i].betaGBs != b.links[i].betaGBs)
      return false;
  return a.gammaGBs == b.gammaGBs && a.callOverheadUs == b.callOverheadUs &&
         a.deviceGammaGBs == b.deviceGammaGBs && a.deviceCopyGBs == b.deviceCopyGBs &&
         a.deviceNet.alphaUs == b.deviceNet.alphaUs && a.deviceNet.betaGBs == b.deviceNet.betaGBs &&
         a.devicePcie.alphaUs == b.devicePcie.alphaUs &&
         a.devicePcie.betaGBs == b.devicePcie.betaGBs;
}

TEST(TunerParamsJson, ReadsEveryField) {
  TunerParams p = defaultTunerParams();
  ASSERT_EQ(tunerParamsFromJson(R"({"links": {"shm": {"alphaUs": 0.4, "betaGBs": 6.5},
                                              "UCX": {"alphaUs": 30, "betaGBs": 1.25},
                                              "cuda_ipc": {"betaGBs": 100}},
                                    "gammaGBs": 3, "callOverheadUs": 0,
                                    "deviceGammaGBs": 800, "deviceCopyGBs": 1200,
                                    "deviceNet": {"alphaUs": 8},
                                    "devicePcie": {"betaGBs": 12}})",
                                &p),
            tsrSuccess)
      << lastErrorMessage();
  EXPECT_EQ(link(p, TransportKind::kShm).alphaUs, 0.4);
  EXPECT_EQ(link(p, TransportKind::kShm).betaGBs, 6.5);
  EXPECT_EQ(link(p, TransportKind::kUcx).alphaUs, 30);
  EXPECT_EQ(link(p, TransportKind::kUcx).betaGBs, 1.25);
  EXPECT_EQ(link(p, TransportKind::kCudaIpc).betaGBs, 100);
  // Absent fields keep their values.
  TunerParams d = defaultTunerParams();
  EXPECT_EQ(link(p, TransportKind::kCudaIpc).alphaUs, link(d, TransportKind::kCudaIpc).alphaUs);
  EXPECT_EQ(link(p, TransportKind::kInproc).betaGBs, link(d, TransportKind::kInproc).betaGBs);
  EXPECT_EQ(p.gammaGBs, 3);
  EXPECT_EQ(p.callOverheadUs, 0);
  EXPECT_EQ(p.deviceGammaGBs, 800);
  EXPECT_EQ(p.deviceCopyGBs, 1200);
  EXPECT_EQ(p.deviceNet.alphaUs, 8);
  EXPECT_EQ(p.deviceNet.betaGBs, d.deviceNet.betaGBs);
  EXPECT_EQ(p.devicePcie.betaGBs, 12);
  EXPECT_EQ(p.devicePcie.alphaUs, d.devicePcie.alphaUs);
  TunerParams q = d;
  ASSERT_EQ(tunerParamsFromJson("{}", &q), tsrSuccess);
  EXPECT_TRUE(sameParams(q, d));
}

struct Hostile {
  std::string text;
  const char* expected;  // part of the error sentence
};

TEST(TunerParamsJson, HostileDocumentsAreErrorsWithTheirPath) {
  const Hostile cases[] = {
      {"", "not valid JSON"},
      {"{\"links\": {", "not valid JSON"},
      {"{\"gammaGBs\": 1e400}", "not valid JSON"},
      {"[1, 2]", "(top level)"},
      {"\"links\"", "(top level)"},
      {"{\"links\": 3}", "links: expected an object"},
      {"{\"linkz\": {}}", "linkz: unknown key"},
      {"{\"links\": {\"nvlink\": {}}}", "links.nvlink: unknown transport"},
      {"{\"links\": {\"shm\": []}}", "links.shm: expected an object"},
      {"{\"links\": {\"shm\": {\"alpha\": 1}}}", "links.shm.alpha: unknown key"},
      {"{\"links\": {\"shm\": {\"alphaUs\": \"fast\"}}}", "links.shm.alphaUs: expected a number"},
      {"{\"links\": {\"shm\": {\"alphaUs\": -1}}}", "links.shm.alphaUs: -1"},
      {"{\"links\": {\"shm\": {\"betaGBs\": 0}}}", "links.shm.betaGBs: 0 must be above 0"},
      {"{\"links\": {\"shm\": {\"betaGBs\": 1e300}}}", "links.shm.betaGBs"},
      {"{\"gammaGBs\": true}", "gammaGBs: expected a number"},
      {"{\"gammaGBs\": -4}", "gammaGBs"},
      {"{\"callOverheadUs\": null}", "callOverheadUs: expected a number"},
      {"{\"" + std::string(5000, 'k') + "\": 1}", "unknown key"},
      {std::string(100000, '[') + std::string(100000, ']'), "(top level)"},
      {std::string(5 << 20, ' '), "more than"},
      // The measured table (tuner_table.hpp).
      {"{\"measured\": {}}", "measured: expected an array"},
      {"{\"measured\": [3]}", "measured[0]: expected an object"},
      {"{\"measured\": [{\"nranks\": 2}]}", "measured[0]: has no collective"},
      {"{\"measured\": [{\"collective\": \"allsum\"}]}", "measured[0].collective"},
      {"{\"measured\": [{\"collective\": \"allreduce\", \"transport\": \"pipe\"}]}",
       "measured[0].transport"},
      {"{\"measured\": [{\"collective\": \"allreduce\", \"nranks\": 0}]}", "measured[0].nranks"},
      {"{\"measured\": [{\"collective\": \"allreduce\", \"points\": [{\"bytes\": 8, \"us\": "
       "{\"bogus\": 1}}]}]}",
       "measured[0].points[0].us.bogus: unknown algorithm family"},
      {"{\"measured\": [{\"collective\": \"allreduce\", \"points\": [{\"bytes\": 8, \"us\": "
       "{\"ring\": -1}}]}]}",
       "measured[0].points[0].us.ring"},
      {"{\"measured\": [{\"collective\": \"allreduce\", \"points\": [{\"bytes\": 8}, "
       "{\"bytes\": 8}]}]}",
       "measured[0].points[1]: points must come in increasing bytes"},
      {"{\"measured\": [{\"collective\": \"allreduce\", \"points\": [{\"us\": {}}]}]}",
       "measured[0].points[0]: has no bytes"},
      {"{\"measured\": [{\"collective\": \"allreduce\"}, {\"collective\": \"allreduce\"}]}",
       "measured[1]: a second set"},
      {"{\"tool\": 3}", "tool: expected a string"},
  };
  const TunerParams defaults = defaultTunerParams();
  for (const Hostile& h : cases) {
    TunerParams p = defaults;
    EXPECT_EQ(tunerParamsFromJson(h.text, &p), tsrInvalidArgument) << h.text.substr(0, 60);
    std::string msg = lastErrorMessage();
    EXPECT_NE(msg.find(h.expected), std::string::npos) << h.expected << " in: " << msg;
    EXPECT_LT(msg.size(), 400u) << msg.substr(0, 100);
    EXPECT_TRUE(sameParams(p, defaults)) << "changed by a failed parse: " << h.text.substr(0, 60);
  }
}

#else  // built without nlohmann-json

TEST(TunerParamsJson, WithoutJsonSupportTheFileIsRefusedWithAReason) {
  TunerParams p = defaultTunerParams();
  EXPECT_EQ(tunerParamsFromJson("{}", &p), tsrInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("JSON"), std::string::npos);
}

#endif

TEST(TunerFromEnv, ReadsAlgoProtoAndDeterministic) {
  ScopedEnv file("TESSERA_TUNER_FILE", nullptr);
  ScopedEnv algo("TESSERA_ALGO", "allreduce:ring,oneshot");
  ScopedEnv proto("TESSERA_PROTO", "^ll128");
  ScopedEnv det("TESSERA_DETERMINISTIC", nullptr);
  Tuner t;
  ASSERT_EQ(Tuner::fromEnv(&t), tsrSuccess) << lastErrorMessage();
  EXPECT_FALSE(t.deterministicDefault());
  TuneInput in;
  in.bytes = size_t{64} << 20;
  in.nranks = 4;
  TuneChoice out;
  ASSERT_EQ(t.choose(in, &out), tsrSuccess);
  EXPECT_EQ(out.algorithm, "ring");  // oneshot is allowed but far slower at 64 MiB

  ScopedEnv det1("TESSERA_DETERMINISTIC", "1");
  ASSERT_EQ(Tuner::fromEnv(&t), tsrSuccess) << lastErrorMessage();
  EXPECT_TRUE(t.deterministicDefault());
  ASSERT_EQ(t.choose(in, &out), tsrSuccess);
  EXPECT_EQ(out.algorithm, "oneshot");  // ring does not reduce in rank order
}

TEST(TunerFromEnv, ReadsTheTunerFile) {
  std::string path = tempPath("json");
  writeFile(path, R"({"gammaGBs": 7, "links": {"shm": {"alphaUs": 0.25}}})");
  ScopedEnv file("TESSERA_TUNER_FILE", path.c_str());
  Tuner t;
  Result r = Tuner::fromEnv(&t);
  std::remove(path.c_str());
  if (!TESSERA_HAVE_JSON) {  // the file is refused, saying why
    EXPECT_EQ(r, tsrInvalidUsage);
    EXPECT_NE(std::string(lastErrorMessage()).find("JSON"), std::string::npos);
    return;
  }
  ASSERT_EQ(r, tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(t.params().gammaGBs, 7);
  EXPECT_EQ(link(t.params(), TransportKind::kShm).alphaUs, 0.25);
  EXPECT_EQ(link(t.params(), TransportKind::kUcx).alphaUs,
            link(defaultTunerParams(), TransportKind::kUcx).alphaUs);
}

TEST(TunerFromEnv, InvalidValuesAreErrors) {
  Tuner t;
  {
    ScopedEnv algo("TESSERA_ALGO", "ring,warp");
    EXPECT_EQ(Tuner::fromEnv(&t), tsrInvalidArgument);
  }
  {
    ScopedEnv proto("TESSERA_PROTO", "LL128");
    EXPECT_EQ(Tuner::fromEnv(&t), tsrInvalidArgument);
    EXPECT_STREQ(lastErrorMessage(),
                 "TESSERA_PROTO=LL128 leaves no protocol tessera has (Simple, LL)");
  }
  {
    ScopedEnv det("TESSERA_DETERMINISTIC", "maybe");
    EXPECT_EQ(Tuner::fromEnv(&t), tsrInvalidArgument);
  }
  std::string missing = tempPath("missing");
  {
    ScopedEnv file("TESSERA_TUNER_FILE", missing.c_str());
    EXPECT_EQ(Tuner::fromEnv(&t), tsrInvalidArgument);
    EXPECT_NE(std::string(lastErrorMessage()).find(missing), std::string::npos);
  }
  std::string bad = tempPath("bad.json");
  writeFile(bad, R"({"links": {"shm": {"betaGBs": "six"}}})");
  {
    ScopedEnv file("TESSERA_TUNER_FILE", bad.c_str());
    EXPECT_EQ(Tuner::fromEnv(&t), TESSERA_HAVE_JSON ? tsrInvalidArgument : tsrInvalidUsage);
    std::string msg = lastErrorMessage();
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
    EXPECT_TRUE(!TESSERA_HAVE_JSON || msg.find("links.shm.betaGBs") != std::string::npos) << msg;
  }
  std::remove(bad.c_str());
}

TEST(TunerFromEnv, NcclAliasesAreReadAndNamedInSentences) {
  // Under tessera's NCCL drop-in (TESSERA_NCCL_ENV=1) a job's NCCL_ALGO / NCCL_PROTO apply, and a
  // value tessera cannot honour is refused naming the variable the user set.
  ScopedEnv on("TESSERA_NCCL_ENV", "1");
  ScopedEnv file("TESSERA_TUNER_FILE", nullptr);
  ScopedEnv algo("TESSERA_ALGO", nullptr);
  ScopedEnv proto("TESSERA_PROTO", nullptr);
  ScopedEnv det("TESSERA_DETERMINISTIC", nullptr);
  ScopedEnv noAlgo("NCCL_ALGO", nullptr);  // this machine's own NCCL settings must not apply
  ScopedEnv noProto("NCCL_PROTO", nullptr);
  Tuner t;
  {
    ScopedEnv ncclProto("NCCL_PROTO", "LL128");
    EXPECT_EQ(Tuner::fromEnv(&t), tsrInvalidArgument);
    EXPECT_STREQ(lastErrorMessage(),
                 "NCCL_PROTO=LL128 leaves no protocol tessera has (Simple, LL)");
  }
  {
    ScopedEnv ncclAlgo("NCCL_ALGO", "NVLS");
    EXPECT_EQ(Tuner::fromEnv(&t), tsrInvalidArgument);
    EXPECT_EQ(std::string(lastErrorMessage()).rfind("NCCL_ALGO=NVLS: unknown algorithm", 0), 0u)
        << lastErrorMessage();
  }
  // Family names are tessera's (NCCL_ALGO=Ring works; NCCL-only ones are refused, as above).
  ScopedEnv ncclAlgo("NCCL_ALGO", "OneShot");
  ScopedEnv ncclProto("NCCL_PROTO", "^LL128");
  ASSERT_EQ(Tuner::fromEnv(&t), tsrSuccess) << lastErrorMessage();
  TuneInput in;
  in.bytes = size_t{64} << 20;
  in.nranks = 4;
  TuneChoice out;
  ASSERT_EQ(t.choose(in, &out), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(out.algorithm, "oneshot");  // far slower than ring at 64 MiB: only NCCL_ALGO allows it
  // TESSERA_ALGO wins over NCCL_ALGO.
  ScopedEnv own("TESSERA_ALGO", "ring,oneshot");
  ASSERT_EQ(Tuner::fromEnv(&t), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(t.choose(in, &out), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(out.algorithm, "ring");
}

TEST(TunerLog, EachChoiceLogsOneLineWithEveryCandidate) {
  std::string path = tempPath("log");
  std::remove(path.c_str());
  LogConfig config;
  config.level = LogLevel::kInfo;
  ASSERT_TRUE(parseSubsysMask("TUNING", &config.subsysMask, nullptr));
  config.file = path;
  logConfigure(config);
  AlgoFilter noTree;
  Result parsed = parseAlgoFilter("^tree", &noTree);
  Tuner tuner(defaultTunerParams(), noTree);
  TuneInput in;
  in.bytes = 1048576;
  in.nranks = 4;
  TuneChoice out;
  Result chosen = tuner.choose(in, &out);
  logConfigure(logConfigFromEnv());
  ASSERT_EQ(parsed, tsrSuccess);
  ASSERT_EQ(chosen, tsrSuccess);

  std::string text = slurp(path);
  std::remove(path.c_str());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  size_t at = text.find("allreduce 1048576 B n=4: " + out.algorithm + " (pipeline " +
                        std::to_string(out.pipeline));
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NE(text.find("TUNING"), std::string::npos) << text;
  for (const AlgorithmInfo& a : algorithms()) {
    std::string name = a.name;
    if (!algorithmSupports(name, Collective::kAllReduce) || a.needsHosts || name == "tree")
      continue;
    EXPECT_NE(text.find(name + (name == out.algorithm ? " (pipeline" : " ")), std::string::npos)
        << name << " missing from: " << text;
  }
  EXPECT_NE(text.find("excluded: tree (TESSERA_ALGO)"), std::string::npos) << text;
  EXPECT_NE(text.find(", protocol Simple (host executor)"), std::string::npos) << text;
}

}  // namespace
}  // namespace tessera
