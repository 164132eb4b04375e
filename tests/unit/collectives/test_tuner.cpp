// The tuner (collectives/tuner): TESSERA_ALGO / TESSERA_PROTO parsing, the choice against the
// algorithm registry (algorithms.hpp, written independently of the tuner), the cost model against
// hand-computed values of its documented closed forms, TESSERA_TUNER_FILE, fromEnv and logging.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/tuner/tuner.hpp"
#include "core/build_config.hpp"

namespace tessera {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

size_t familyIndex(const std::string& name) {
  const auto& all = algorithms();
  for (size_t i = 0; i < all.size(); ++i)
    if (name == all[i].name) return i;
  ADD_FAILURE() << "no family " << name;
  return 0;
}

bool allows(const AlgoFilter& f, Collective c, const std::string& name) {
  const std::vector<bool>& v = f.allowed[static_cast<size_t>(c)];
  size_t i = familyIndex(name);
  return i >= v.size() || v[i];
}

std::vector<Collective> allCollectives() {
  std::vector<Collective> out;
  for (int c = 0; c < kCollectiveCount; ++c) out.push_back(static_cast<Collective>(c));
  return out;
}

std::string familyList() {
  std::string s;
  for (const AlgorithmInfo& a : algorithms()) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

TuneInput input(Collective c, size_t bytes, int n, int hosts = 1) {
  TuneInput in;
  in.collective = c;
  in.bytes = bytes;
  in.nranks = n;
  if (hosts > 1)
    for (int r = 0; r < n; ++r) in.hostOf.push_back(r * hosts / n);  // contiguous blocks
  return in;
}

AlgoFilter filterOf(const std::string& value) {
  AlgoFilter f;
  EXPECT_EQ(parseAlgoFilter(value, &f), tsrSuccess) << value << ": " << lastErrorMessage();
  return f;
}

// ---- TESSERA_ALGO ------------------------------------------------------------------------------

TEST(TunerAlgoFilter, EmptyAllowsEverything) {
  for (const char* v : {"", "   ", ";"}) {
    AlgoFilter f = filterOf(v);
    for (Collective c : allCollectives())
      for (const AlgorithmInfo& a : algorithms()) EXPECT_TRUE(allows(f, c, a.name)) << v;
  }
}

TEST(TunerAlgoFilter, AListAllowsOnlyTheNamedFamiliesEverywhere) {
  AlgoFilter f = filterOf("ring,tree");
  for (Collective c : allCollectives())
    for (const AlgorithmInfo& a : algorithms())
      EXPECT_EQ(allows(f, c, a.name),
                std::string(a.name) == "ring" || std::string(a.name) == "tree")
          << collectiveName(c) << " " << a.name;
}

TEST(TunerAlgoFilter, CaretAllowsAllButTheNamed) {
  AlgoFilter f = filterOf("^tree");
  for (Collective c : allCollectives())
    for (const AlgorithmInfo& a : algorithms())
      EXPECT_EQ(allows(f, c, a.name), std::string(a.name) != "tree") << a.name;
}

void expectPerCollectiveRules(const AlgoFilter& f) {
  for (const AlgorithmInfo& a : algorithms()) {
    std::string n = a.name;
    EXPECT_EQ(allows(f, Collective::kAllReduce, n), n == "ring" || n == "tree") << n;
    EXPECT_EQ(allows(f, Collective::kAllGather, n), n != "rhd") << n;
    EXPECT_TRUE(allows(f, Collective::kBroadcast, n)) << n;  // not named: unrestricted
  }
}

TEST(TunerAlgoFilter, PerCollectiveRules) {
  expectPerCollectiveRules(filterOf("allreduce:ring,tree;allgather:^rhd"));
}

TEST(TunerAlgoFilter, CaseAndSpacesAreTolerated) {
  expectPerCollectiveRules(filterOf(" AllReduce : RING , Tree ; all_gather : ^ RhD ;"));
}

TEST(TunerAlgoFilter, LaterRulesReplaceEarlierOnesForTheirCollectives) {
  AlgoFilter f = filterOf("ring;allreduce:tree");
  EXPECT_TRUE(allows(f, Collective::kAllReduce, "tree"));
  EXPECT_FALSE(allows(f, Collective::kAllReduce, "ring"));
  EXPECT_TRUE(allows(f, Collective::kAllGather, "ring"));
  EXPECT_FALSE(allows(f, Collective::kAllGather, "rhd"));
}

TEST(TunerAlgoFilter, UnknownFamiliesAndCollectivesAreNamedWithTheValidChoices) {
  AlgoFilter before = filterOf("ring");
  AlgoFilter f = before;
  ASSERT_EQ(parseAlgoFilter("ring,fastest", &f), tsrInvalidArgument);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("'fastest'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(familyList()), std::string::npos) << msg;
  EXPECT_EQ(f.allowed, before.allowed);  // untouched on failure

  ASSERT_EQ(parseAlgoFilter("allredux:ring", &f), tsrInvalidArgument);
  msg = lastErrorMessage();
  EXPECT_NE(msg.find("allredux"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reducescatter"), std::string::npos) << msg;  // the valid collectives
  EXPECT_NE(msg.find("TESSERA_ALGO"), std::string::npos) << msg;

  for (const char* bad : {"ring,,tree", "allreduce:", "^", ":ring", "allreduce,:ring", "ring tree"})
    EXPECT_EQ(parseAlgoFilter(bad, &f), tsrInvalidArgument) << bad;
}

// ---- TESSERA_PROTO -----------------------------------------------------------------------------

TEST(TunerProtoFilter, AnythingThatKeepsSimpleIsAccepted) {
  for (const char* v :
       {"", "simple", "SIMPLE", " ^ ll , LL128 ", "simple,ll", "allreduce:simple;allgather:^ll"})
    EXPECT_EQ(parseProtoFilter(v), tsrSuccess) << v << ": " << lastErrorMessage();
}

TEST(TunerProtoFilter, LeavingNeitherSimpleNorLLIsAnError) {
  ASSERT_EQ(parseProtoFilter("ll128"), tsrInvalidArgument);
  EXPECT_EQ(std::string(lastErrorMessage())
                .rfind("TESSERA_PROTO=ll128 leaves no protocol tessera has (Simple, LL)", 0),
            0u)
      << lastErrorMessage();
  for (const char* v : {"^simple,ll", "allgather:ll128", "Simple;^SIMPLE,LL", "^LL,simple,ll128"})
    EXPECT_EQ(parseProtoFilter(v), tsrInvalidArgument) << v;
  ASSERT_EQ(parseProtoFilter("fast"), tsrInvalidArgument);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("'fast'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Simple, LL, LL128"), std::string::npos) << msg;
}

TEST(TunerProtoFilter, LLAndSimpleParseInNcclSyntax) {
  ProtoFilter f;
  ASSERT_EQ(parseProtoFilter("LL", &f), tsrSuccess) << lastErrorMessage();
  EXPECT_TRUE(f.allows(Collective::kAllReduce, Protocol::kLL));
  EXPECT_FALSE(f.allows(Collective::kAllReduce, Protocol::kSimple));
  ASSERT_EQ(parseProtoFilter("^ll", &f), tsrSuccess);
  EXPECT_FALSE(f.allows(Collective::kAllGather, Protocol::kLL));
  EXPECT_TRUE(f.allows(Collective::kAllGather, Protocol::kSimple));
  ASSERT_EQ(parseProtoFilter("allreduce:ll;broadcast:^LL", &f), tsrSuccess);
  EXPECT_FALSE(f.allows(Collective::kAllReduce, Protocol::kSimple));
  EXPECT_FALSE(f.allows(Collective::kBroadcast, Protocol::kLL));
  EXPECT_TRUE(f.allows(Collective::kReduce, Protocol::kLL));
  EXPECT_TRUE(f.allows(Collective::kReduce, Protocol::kSimple));
  ASSERT_EQ(parseProtoFilter("", &f), tsrSuccess);
  for (int c = 0; c < kCollectiveCount; ++c)
    EXPECT_TRUE(f.allows(static_cast<Collective>(c), Protocol::kLL));
  EXPECT_STREQ(protocolName(Protocol::kLL), "LL");
  EXPECT_STREQ(protocolName(Protocol::kSimple), "Simple");
}

// ---- choose() ----------------------------------------------------------------------------------

const std::vector<size_t> kSizes = {0, 8, 4096, 65536, kMiB, 64 * kMiB};

TEST(TunerChoose, NeverPicksAFamilyThatDoesNotApply) {
  Tuner tuner;
  for (Collective c : allCollectives())
    for (int n : {1, 2, 3, 4, 7, 8, 16})
      for (int hosts : {1, 2})
        for (bool zc : {false, true})
          for (size_t bytes : kSizes) {
            if (hosts > n) continue;
            TuneInput in = input(c, bytes, n, hosts);
            in.zeroCopyPossible = zc;
            TuneChoice out;
            ASSERT_EQ(tuner.choose(in, &out), tsrSuccess) << lastErrorMessage();
            SCOPED_TRACE(std::string(collectiveName(c)) + " n=" + std::to_string(n) +
                         " hosts=" + std::to_string(hosts) + " bytes=" + std::to_string(bytes) +
                         ": " + out.algorithm);
            const AlgorithmInfo* a = findAlgorithm(out.algorithm);
            ASSERT_NE(a, nullptr);
            EXPECT_TRUE(algorithmSupports(out.algorithm, c));
            EXPECT_TRUE(hosts > 1 || !a->needsHosts);
            EXPECT_TRUE(!out.zeroCopy || zc);
            EXPECT_GE(out.pipeline, 1);
            EXPECT_LE(out.pipeline * n, kMaxChunksPerSegment);
            EXPECT_EQ(out.workers, out.algorithm == "tree" ? 2 : 1);
            EXPECT_GT(out.predictedUs, 0);
          }
}

TEST(TunerChoose, SmallMessagesPreferOneShot) {
  Tuner tuner;
  for (int n : {2, 4, 8, 16}) {
    TuneChoice out;
    ASSERT_EQ(tuner.choose(input(Collective::kAllReduce, 8, n), &out), tsrSuccess);
    EXPECT_EQ(out.algorithm, "oneshot") << n;
    EXPECT_EQ(out.pipeline, 1) << n;
  }
}

TEST(TunerChoose, LargeMessagesPreferABandwidthFamilyWithPipelinedChunks) {
  Tuner tuner;
  for (int n : {3, 4, 8}) {
    TuneInput in = input(Collective::kAllReduce, 64 * kMiB, n);
    TuneChoice out;
    ASSERT_EQ(tuner.choose(in, &out), tsrSuccess);
    EXPECT_NE(out.algorithm, "oneshot") << n;
    // The all-pairs gather moves n-1 whole buffers per rank: far slower at this size.
    EXPECT_GT(tuner.predictUs(in, "oneshot", 1), 2 * out.predictedUs) << n;
    EXPECT_GT(out.pipeline, 1) << n;
    double chunk = static_cast<double>(in.bytes) / (n * out.pipeline);
    EXPECT_GE(chunk, 64 * 1024) << n;
    EXPECT_LE(chunk, 8 * kMiB) << n;
  }
}

// Whether a family has a zero-copy variant of a collective is the generator's to say: the tuner
// claims a zero-copy choice, and spares it the staging pass, exactly where generatePlan makes one.
TEST(TunerChoose, ZeroCopyExactlyWhereTheGeneratorHasAVariant) {
  for (const AlgorithmInfo& a : algorithms())
    for (Collective c : a.collectives) {
      SCOPED_TRACE(std::string(a.name) + " " + collectiveName(c));
      TuneInput staged = input(c, 64 * kMiB, 4, a.needsHosts ? 2 : 1);
      TuneInput direct = staged;
      direct.zeroCopyPossible = true;
      Tuner only(defaultTunerParams(), filterOf(a.name));
      TuneChoice out;
      ASSERT_EQ(only.choose(direct, &out), tsrSuccess) << lastErrorMessage();
      GenParams g;
      g.collective = c;
      g.algorithm = a.name;
      g.nranks = 4;
      g.pipeline = out.pipeline;
      g.workers = out.workers;
      g.zeroCopy = true;
      g.hostOf = direct.hostOf;
      Plan plan;
      ASSERT_EQ(generatePlan(g, &plan), tsrSuccess) << lastErrorMessage();
      EXPECT_EQ(out.zeroCopy, plan.zeroCopy);
      double saved = only.predictUs(staged, a.name, 4) - only.predictUs(direct, a.name, 4);
      EXPECT_EQ(saved > 0, plan.zeroCopy) << saved;
      EXPECT_GE(saved, 0);
    }
  Tuner tuner;
  TuneInput in = input(Collective::kAllReduce, 64 * kMiB, 4);
  in.zeroCopyPossible = true;
  TuneChoice out;
  ASSERT_EQ(tuner.choose(in, &out), tsrSuccess);
  EXPECT_TRUE(out.zeroCopy) << out.algorithm;
}

TEST(TunerChoose, SeveralHostsBehindASlowLinkUseHier) {
  Tuner tuner;  // defaults: shm within a host, ucx over TCP between hosts
  TuneChoice out;
  ASSERT_EQ(tuner.choose(input(Collective::kAllReduce, 64 * kMiB, 8, 2), &out), tsrSuccess);
  EXPECT_EQ(out.algorithm, "hier");
  ASSERT_EQ(tuner.choose(input(Collective::kAllReduce, 8, 8, 2), &out), tsrSuccess);
  EXPECT_NE(out.algorithm, "hier");  // two host-level phases cost more latency than one read
  TuneInput oneHost = input(Collective::kAllReduce, 64 * kMiB, 8);
  oneHost.hostOf.assign(8, 3);
  ASSERT_EQ(tuner.choose(oneHost, &out), tsrSuccess);
  EXPECT_NE(out.algorithm, "hier");
  EXPECT_LT(tuner.predictUs(oneHost, "hier", 1), 0);
}

TEST(TunerChoose, RespectsTheFilter) {
  TuneChoice out;
  Tuner ring(defaultTunerParams(), filterOf("ring"));
  ASSERT_EQ(ring.choose(input(Collective::kAllReduce, 8, 4), &out), tsrSuccess);
  EXPECT_EQ(out.algorithm, "ring");
  Tuner noOneShot(defaultTunerParams(), filterOf("^oneshot"));
  ASSERT_EQ(noOneShot.choose(input(Collective::kAllReduce, 8, 4), &out), tsrSuccess);
  EXPECT_NE(out.algorithm, "oneshot");
  Tuner tree(defaultTunerParams(), filterOf("allreduce:tree"));
  for (size_t bytes : kSizes) {
    ASSERT_EQ(tree.choose(input(Collective::kAllReduce, bytes, 8), &out), tsrSuccess);
    EXPECT_EQ(out.algorithm, "tree");
    EXPECT_EQ(out.workers, 2);
  }
  ASSERT_EQ(tree.choose(input(Collective::kAllGather, 8, 8), &out), tsrSuccess);
}

TEST(TunerChoose, AFilterThatLeavesNothingFailsNamingTesseraAlgo) {
  TuneChoice out;
  Tuner tree(defaultTunerParams(), filterOf("tree"));
  ASSERT_EQ(tree.choose(input(Collective::kAllGather, 1024, 4), &out), tsrInvalidUsage);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("TESSERA_ALGO='tree'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allgather"), std::string::npos) << msg;
  // hier is allowed but does not apply on one host.
  Tuner hierOnly(defaultTunerParams(), filterOf("hier"));
  EXPECT_EQ(hierOnly.choose(input(Collective::kAllReduce, 1024, 4), &out), tsrInvalidUsage);
  EXPECT_EQ(hierOnly.choose(input(Collective::kAllReduce, 1024, 4, 2), &out), tsrSuccess);
}

TEST(TunerChoose, DeterministicKeepsCanonicalFamiliesForReducingCollectives) {
  Tuner tuner;
  for (Collective c : allCollectives())
    for (int hosts : {1, 2})
      for (size_t bytes : kSizes) {
        TuneInput in = input(c, bytes, 8, hosts);
        in.deterministic = true;
        TuneChoice out;
        ASSERT_EQ(tuner.choose(in, &out), tsrSuccess) << lastErrorMessage();
        EXPECT_TRUE(!collectiveReduces(c) || findAlgorithm(out.algorithm)->canonicalOrder)
            << collectiveName(c) << " " << bytes << ": " << out.algorithm;
      }
  TuneInput a2a = input(Collective::kAllToAll, kMiB, 4);
  a2a.deterministic = true;  // nothing to reduce: every family stays
  TuneChoice out;
  ASSERT_EQ(tuner.choose(a2a, &out), tsrSuccess);
  EXPECT_EQ(out.algorithm, "pairwise");
}

TEST(TunerChoose, DeterministicWithAFilterThatLeavesNothingNamesBothVariables) {
  Tuner tuner(defaultTunerParams(), filterOf("ring,tree"));
  TuneInput in = input(Collective::kAllReduce, kMiB, 4);
  in.deterministic = true;
  TuneChoice out;
  ASSERT_EQ(tuner.choose(in, &out), tsrInvalidUsage);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("TESSERA_ALGO"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TESSERA_DETERMINISTIC"), std::string::npos) << msg;
}

TEST(TunerChoose, BadInputsAreErrors) {
  Tuner tuner;
  TuneChoice out;
  EXPECT_EQ(tuner.choose(input(Collective::kAllReduce, 8, 0), &out), tsrInvalidArgument);
  EXPECT_EQ(tuner.choose(input(Collective::kAllReduce, 8, kMaxPlanRanks + 1), &out),
            tsrInvalidArgument);
  TuneInput in = input(Collective::kAllReduce, 8, 4, 2);
  in.hostOf.pop_back();
  EXPECT_EQ(tuner.choose(in, &out), tsrInvalidArgument);
  in.hostOf = {0, 0, -1, 1};
  EXPECT_EQ(tuner.choose(in, &out), tsrInvalidArgument);
  TuneInput bcast = input(Collective::kBroadcast, 8, 4);
  bcast.root = 4;
  EXPECT_EQ(tuner.choose(bcast, &out), tsrInvalidArgument);
}

// ---- protocol choice ---------------------------------------------------------------------------

TuneInput deviceInput(Collective c, size_t bytes, int n) {
  TuneInput in = input(c, bytes, n);
  in.deviceExecutor = true;
  in.intraHost = TransportKind::kP2p;
  return in;
}

Tuner protoTuner(const std::string& proto) {
  ProtoFilter f;
  EXPECT_EQ(parseProtoFilter(proto, &f), tsrSuccess) << proto << ": " << lastErrorMessage();
  return Tuner(defaultTunerParams(), AlgoFilter{}, f);
}

TEST(TunerProtocol, SmallDeviceCallsPickLLLargeOnesSimple) {
  Tuner tuner;
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kAllToAll, Collective::kBroadcast, Collective::kReduce}) {
    TuneChoice out;
    ASSERT_EQ(tuner.choose(deviceInput(c, 256, 4), &out), tsrSuccess) << lastErrorMessage();
    EXPECT_EQ(out.protocol, Protocol::kLL) << collectiveName(c);
    EXPECT_FALSE(out.algorithm.empty());  // the Simple fallback is named
    EXPECT_DOUBLE_EQ(out.predictedUs, tuner.predictLLUs(deviceInput(c, 256, 4)));
    // Past what LL carries: Simple, and LL does not apply at all.
    TuneInput big = deviceInput(c, 64 * kMiB, 4);
    ASSERT_EQ(tuner.choose(big, &out), tsrSuccess);
    EXPECT_EQ(out.protocol, Protocol::kSimple) << collectiveName(c);
    EXPECT_LT(tuner.predictLLUs(big), 0);
  }
}

TEST(TunerProtocol, LLCostHasHalfTheBandwidth) {
  Tuner tuner;
  // Within LL's range the predicted time grows with the size, at twice the bytes of Simple's
  // wire time (half of every line is flag).
  double t1 = tuner.predictLLUs(deviceInput(Collective::kAllGather, 4 * 1024, 4));
  double t2 = tuner.predictLLUs(deviceInput(Collective::kAllGather, 4 * 4096, 4));
  ASSERT_GT(t1, 0);
  const LinkModel p2p = defaultTunerParams().links[static_cast<size_t>(TransportKind::kP2p)];
  EXPECT_NEAR(t2 - t1, 3.0 * 2 * 3 * 1024 / (p2p.betaGBs * 1e3), 1e-9);
}

TEST(TunerProtocol, LLOnlyOnTheDeviceExecutorWithinAMappedHost) {
  Tuner forced = protoTuner("LL");
  TuneChoice out;
  TuneInput host = input(Collective::kAllReduce, 256, 4);  // host executor: never LL
  host.intraHost = TransportKind::kShm;
  ASSERT_EQ(forced.choose(host, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kSimple);
  TuneInput ucx = deviceInput(Collective::kAllReduce, 256, 4);
  ucx.intraHost = TransportKind::kUcx;  // peers reached through the proxy: no mapped inbox
  ASSERT_EQ(forced.choose(ucx, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kSimple);
  TuneInput twoHosts = deviceInput(Collective::kAllReduce, 256, 4);
  twoHosts.hostOf = {0, 0, 1, 1};
  ASSERT_EQ(forced.choose(twoHosts, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kSimple);
  EXPECT_LT(forced.predictLLUs(twoHosts), 0);
  TuneInput tooMany = deviceInput(Collective::kAllReduce, 256, 33);
  EXPECT_LT(forced.predictLLUs(tooMany), 0);
}

// The device model (TuneInput::workers, scratchBytes, nicsPerHost; tuner.hpp): what the device
// executor runs by default on DGX-H100 nodes (cuda_ipc within a node, 8 CTAs, 64 MiB, 8 NICs).
TuneInput dgxInput(Collective c, size_t bytes, int nodes) {
  TuneInput in = input(c, bytes, 8 * nodes, nodes);
  in.deviceExecutor = true;
  in.intraHost = TransportKind::kCudaIpc;
  in.workers = 8;
  in.scratchBytes = 64ull << 20;
  in.nicsPerHost = 8;
  return in;
}

// Large calls go to the ring, whose messages stream through the scratch and whose rings (one per
// CTA) leave a node over every NIC; tessera_sim puts the other families far below it there
// (SimStaged and tessera_sim's device choice).
TEST(TunerDevice, LargeCallsOnGpuNodesTakeTheRing) {
  Tuner tuner;
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter})
    for (int nodes : {1, 2, 16})
      for (size_t bytes : {size_t{128} << 20, size_t{1} << 30}) {
        TuneChoice out;
        ASSERT_EQ(tuner.choose(dgxInput(c, bytes, nodes), &out), tsrSuccess);
        EXPECT_EQ(out.algorithm, "ring")
            << collectiveName(c) << " " << bytes << " B on " << nodes << " node(s)";
        EXPECT_GE(out.pipeline, 8) << "a piece of every block for each of the 8 rings";
      }
}

// A staged call runs once per slice: a smaller scratch costs a family more iterations (each
// paying its steps' latencies), most for the family with the smallest slice per byte of scratch.
TEST(TunerDevice, ASmallerScratchCostsIterations) {
  Tuner tuner;
  TuneInput big = dgxInput(Collective::kAllReduce, size_t{256} << 20, 1);
  TuneInput small = big;
  small.scratchBytes = 1 << 20;
  for (const char* family : {"ring", "rhd", "twoshot"}) {
    const double a = tuner.predictUs(big, family, 8), b = tuner.predictUs(small, family, 8);
    EXPECT_GT(b, a) << family;
  }
  TuneInput unmodelled = big;
  unmodelled.scratchBytes = 0;
  EXPECT_LE(tuner.predictUs(unmodelled, "rhd", 8), tuner.predictUs(big, "rhd", 8));
}

// Between nodes a host's crossing rings spread over its NICs: with one NIC the same ring is
// predicted slower.
TEST(TunerDevice, CrossingRingsSpreadOverTheNics) {
  Tuner tuner;
  TuneInput eight = dgxInput(Collective::kAllReduce, size_t{1} << 30, 2);
  TuneInput one = eight;
  one.nicsPerHost = 1;
  EXPECT_GT(tuner.predictUs(one, "ring", 8), 4 * tuner.predictUs(eight, "ring", 8));
}

// GPUs of a node joined by PCIe only (TuneInput::devicePcie): the intra-node link is
// TunerParams::devicePcie, so a bandwidth-bound call is predicted about as much slower as the
// links' bandwidths differ (377 / 25 GB/s by default); host calls ignore it.
TEST(TunerDevice, PcieOnlyGpusArePricedAtPcie) {
  Tuner tuner;
  const TunerParams& p = tuner.params();
  for (Collective c :
       {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
    TuneInput nvlink = dgxInput(c, size_t{256} << 20, 1);
    TuneInput pcie = nvlink;
    pcie.devicePcie = true;
    const double ratio =
        p.links[static_cast<size_t>(TransportKind::kCudaIpc)].betaGBs / p.devicePcie.betaGBs;
    const double a = tuner.predictUs(nvlink, "ring", 8), b = tuner.predictUs(pcie, "ring", 8);
    EXPECT_GT(b, 0.7 * ratio * a) << collectiveName(c);
    EXPECT_LT(b, 1.3 * ratio * a) << collectiveName(c);
    TuneChoice out;
    ASSERT_EQ(tuner.choose(pcie, &out), tsrSuccess);
    EXPECT_GT(out.predictedUs, 0.7 * ratio * tuner.predictUs(nvlink, out.algorithm, out.pipeline))
        << collectiveName(c) << ": the PCIe choice " << out.algorithm;
  }
  TuneInput host = input(Collective::kAllReduce, size_t{1} << 20, 4, 1);
  TuneInput hostPcie = host;
  hostPcie.devicePcie = true;  // a device-only field
  EXPECT_EQ(tuner.predictUs(host, "ring", 1), tuner.predictUs(hostPcie, "ring", 1));
}

TEST(TunerProtocol, ProtoOverridesForceAndForbidLL) {
  // At LL's largest allreduce Simple is predicted cheaper (8 ranks, 64 KiB): "LL" forces LL.
  TuneInput in = deviceInput(Collective::kAllReduce, 64 * 1024, 8);
  TuneChoice out;
  Tuner tuner;
  ASSERT_EQ(tuner.choose(in, &out), tsrSuccess);
  const double simpleUs = tuner.predictUs(in, out.algorithm, out.pipeline);
  ASSERT_GT(tuner.predictLLUs(in), simpleUs) << "the model no longer prefers Simple here";
  EXPECT_EQ(out.protocol, Protocol::kSimple);
  ASSERT_EQ(protoTuner("LL").choose(in, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kLL);
  ASSERT_EQ(protoTuner("allgather:LL").choose(in, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kSimple);  // the rule names another collective
  // A tiny call would pick LL; "^LL" forbids it.
  TuneInput tiny = deviceInput(Collective::kAllReduce, 8, 8);
  ASSERT_EQ(protoTuner("^LL").choose(tiny, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kSimple);
  ASSERT_EQ(protoTuner("Simple").choose(tiny, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kSimple);
  ASSERT_EQ(protoTuner("simple,ll").choose(tiny, &out), tsrSuccess);
  EXPECT_EQ(out.protocol, Protocol::kLL);
}

}  // namespace
}  // namespace tessera
