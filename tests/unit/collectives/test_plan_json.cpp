// Plans as JSON: exact round trips, the documented format, and hostile text (each rejected with
// tsrInvalidArgument and a sentence naming the JSON path), file writing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "collectives/plan/plan.hpp"
#include "collectives/plan/plan_json.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/status.hpp"
#include "test_plan_plans.hpp"

namespace tessera {
namespace {

using namespace testplans;

class PlanJson : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!planJsonAvailable()) GTEST_SKIP() << "built without nlohmann-json";
  }
};

std::string toJson(const Plan& p, bool pretty = true) {
  std::string text;
  EXPECT_EQ(planToJson(p, &text, pretty), tsrSuccess) << lastErrorMessage();
  return text;
}

// A small plan text written by hand in the documented format.
const char* kHandWritten = R"({
  "format": "tessera-plan", "version": 1, "collective": "broadcast", "nranks": 2,
  "ranks": [
    {"credits": [{"peer": 1, "channel": 1, "initial": 1}],
     "workers": [{"ops": [
       {"op": "wait", "peer": 1, "channel": 1},
       {"op": "put", "src": {"buffer": "input", "index": 0},
                     "dst": {"rank": 1, "buffer": "scratch", "index": 0, "count": 1}},
       {"op": "signal", "peer": 1},
       {"op": "copy", "src": {"buffer": "input", "index": 0}, "dst": {"buffer": "output", "index": 0}}
     ]}]},
    {"scratchSegments": 1,
     "workers": [{"ops": [
       {"op": "wait", "peer": 0},
       {"op": "copy", "src": {"buffer": "scratch", "index": 0}, "dst": {"buffer": "output", "index": 0}},
       {"op": "signal", "peer": 0, "channel": 1}
     ]}]}
  ]
})";

TEST_F(PlanJson, HandWrittenTextMatchesTheBuiltPlan) {
  Plan p;
  ASSERT_EQ(planFromJson(kHandWritten, "hand.json", &p), tsrSuccess) << lastErrorMessage();
  Plan want = starBroadcast(2, 0, 1);
  want.name = "";
  want.algorithm = "";
  EXPECT_TRUE(p == want) << toJson(p);
  VerifyReport report;
  EXPECT_EQ(verifyPlan(p, &report), tsrSuccess) << report.message;
}

TEST_F(PlanJson, RoundTripsExactly) {
  Plan plans[] = {ringAllReduce(3), starBroadcast(4, 2, 3), getAllGather(3, 2)};
  plans[1].canonicalOrder = true;
  Op rs = dataOp(OpCode::kReduceSend, {local(kIn, 0), local(kScr, 1)}, remote(2, kScr, 0));
  rs.hasDst2 = true;
  rs.dst2 = local(kOut, 0);
  Op put = dataOp(OpCode::kPut, {local(kScr, 1)}, remote(2, kScr, 0));  // forward and keep
  put.hasDst2 = true;
  put.dst2 = local(kOut, 1);
  plans[0].ranks[1].workers.push_back(Worker{{rs, put, flush(2), barrier()}});
  for (const Plan& p : plans) {
    for (bool pretty : {true, false}) {
      std::string text = toJson(p, pretty);
      Plan back;
      ASSERT_EQ(planFromJson(text, "x.json", &back), tsrSuccess) << lastErrorMessage();
      EXPECT_TRUE(back == p) << text;
      EXPECT_EQ(toJson(back, pretty), text);
      EXPECT_EQ(pretty, text.find('\n') < text.size() - 1);
    }
  }
}

TEST_F(PlanJson, PrettyLayoutIsOneOpPerLine) {
  std::string text = toJson(starBroadcast(2, 0, 1));
  EXPECT_NE(text.find("\n            {\"op\": \"put\", \"src\": {\"buffer\": \"input\", \"index\": "
                      "0}, \"dst\": {\"rank\": 1, \"buffer\": \"scratch\", \"index\": 0}},\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.rfind("{\n  \"format\": \"tessera-plan\",\n  \"version\": 1,\n", 0), 0u) << text;
}

// Replaces the first occurrence of `from` in the canonical text of a plan with `to`.
std::string edited(const Plan& p, const std::string& from, const std::string& to) {
  std::string text = toJson(p, false);
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void expectRejected(const std::string& text, const std::string& words) {
  Plan p;
  Result r = planFromJson(text, "bad.json", &p);
  EXPECT_EQ(r, tsrInvalidArgument) << text.substr(0, 200);
  std::string why = lastErrorMessage();
  EXPECT_EQ(why.rfind("bad.json: ", 0), 0u) << why;
  EXPECT_NE(why.find(words), std::string::npos) << "\"" << words << "\" not in: " << why;
}

TEST_F(PlanJson, RejectsWrongTypesWithThePath) {
  Plan p = ringAllReduce(2);
  // Rank 1's op 4 is the first reduce: srcs [input[0], scratch[0]] -> output[0].
  std::string ref = R"({"buffer":"output","index":0})";
  expectRejected(edited(p, R"("nranks":2)", R"("nranks":"2")"),
                 "nranks: expected an integer, found \"2\"");
  expectRejected(edited(p, R"("zeroCopy":false)", R"("zeroCopy":0)"),
                 "zeroCopy: expected true or false, found 0");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":"x"},"dst")"),
                 "ranks[0].workers[0].ops[1].src.index: expected an integer, found \"x\"");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":1.5},"dst")"),
                 "ranks[0].workers[0].ops[1].src.index: expected an integer, found 1.5");
  expectRejected(R"({"format":"tessera-plan","version":1,"collective":"allreduce","nranks":1,)"
                 R"("ranks":{"a":1}})",
                 "ranks: expected an array, found object");
  expectRejected(edited(p, R"({"ops":[)", R"({"ops":[7,)"),
                 "ranks[0].workers[0].ops[0]: expected an object, found an integer 7");
}

TEST_F(PlanJson, RejectsUnknownNamesAndFields) {
  Plan p = ringAllReduce(2);
  expectRejected(edited(p, R"("op":"put")", R"("op":"push")"),
                 "ranks[0].workers[0].ops[1].op: unknown name \"push\"");
  expectRejected(edited(p, R"("buffer":"scratch")", R"("buffer":"scrach")"),
                 "ranks[0].workers[0].ops[1].dst.buffer: unknown name \"scrach\"");
  expectRejected(edited(p, R"("collective":"allreduce")", R"("collective":"allsum")"),
                 "collective: unknown name \"allsum\"");
  expectRejected(edited(p, R"("op":"signal","peer":1,)", R"("op":"signal","peer":1,"chanel":0,)"),
                 "ranks[0].workers[0].ops[2].chanel: unknown field");
  expectRejected(edited(p, R"("scratchSegments":2,)", R"("scratchSegments":2,"extra":[],)"),
                 "ranks[0].extra: unknown field");
  expectRejected(edited(p, R"("op":"put",)", R"("op":"put","peer":1,)"),
                 "ranks[0].workers[0].ops[1].peer: unknown field");
  expectRejected(edited(p, R"("format":"tessera-plan")", R"("format":"msccl")"),
                 "format: expected \"tessera-plan\"");
  expectRejected(edited(p, R"("version":1)", R"("version":2)"), "version: version 2 not supported");
  expectRejected(edited(p, R"("nranks":2,)", ""), "nranks: missing field");
  expectRejected(edited(p, R"("src":{"buffer":"input","index":0},)", ""),
                 "ranks[0].workers[0].ops[1].src: missing field");
}

TEST_F(PlanJson, RejectsOutOfRangeValuesWithThePath) {
  Plan p = ringAllReduce(2);
  expectRejected(edited(p, R"("nranks":2)", R"("nranks":20000)"), "nranks: 20000 out of range");
  expectRejected(edited(p, R"("root":0)", R"("root":5)"), "root: rank 5 out of range");
  expectRejected(edited(p, R"("chunksPerSegment":2)", R"("chunksPerSegment":0)"),
                 "chunksPerSegment: 0 out of range");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":2},"dst")"),
                 "ranks[0].workers[0].ops[1].src.index: chunk 2 out of range (input has 2 chunks)");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":-1},"dst")"),
                 "ranks[0].workers[0].ops[1].src.index: chunk -1 out of range");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":1,"count":-3},"dst")"),
                 "ranks[0].workers[0].ops[1].src.count: -3 chunks");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":1,"count":2147483647},"dst")"),
                 "ranks[0].workers[0].ops[1].src.count: chunks 1..2147483647 out of range");
  expectRejected(edited(p, R"("op":"signal","peer":1)", R"("op":"signal","peer":0)"),
                 "ranks[0].workers[0].ops[2].peer: peer 0 invalid for rank 0");
  expectRejected(edited(p, R"("rank":1,"buffer":"scratch")", R"("rank":9,"buffer":"scratch")"),
                 "ranks[0].workers[0].ops[1].dst.rank: rank 9 out of range");
  expectRejected(edited(p, R"("initial":2)", R"("initial":-1)"),
                 "ranks[0].credits[0].initial: -1 out of range");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":9223372036854775807},"dst")"),
                 "ranks[0].workers[0].ops[1].src.index: 9223372036854775807 out of range (a "
                 "32-bit integer)");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":18446744073709551615},"dst")"),
                 "src.index: 18446744073709551615 out of range");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":1e400},"dst")"),
                 "not valid JSON (byte 369): number overflow parsing '1e400'");
  expectRejected(edited(p, R"("index":0},"dst")", R"("index":-2147483649},"dst")"),
                 "src.index: -2147483649 out of range");
}

TEST_F(PlanJson, RejectsBrokenText) {
  std::string good = toJson(ringAllReduce(2), false);
  expectRejected(good.substr(0, good.size() / 2), "not valid JSON (byte");
  expectRejected("", "not valid JSON");
  expectRejected("[1, 2]", "expected an object, found array");
  expectRejected("\"plan\"", "expected an object, found string");
  expectRejected(edited(ringAllReduce(2), R"("index":0},"dst")", R"("index":NaN},"dst")"),
                 "not valid JSON");
  expectRejected(std::string(1000000, '['), "nested deeper than 64 levels at byte 64");
  expectRejected(std::string(100, '{'), "nested deeper than 64 levels");
  // Brackets inside strings do not count as nesting.
  Plan named = ringAllReduce(2);
  named.name = std::string(100, '[') + "\"\\";
  std::string text = toJson(named);
  Plan back;
  EXPECT_EQ(planFromJson(text, "x", &back), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(back.name, named.name);
  expectRejected(std::string(33u << 20, ' '), "document of 34603008 bytes (at most 33554432)");
}

// Array sizes are checked before the reader allocates for them: a document of a few MB with more
// ops than a rank may have is refused by its count, naming the path, before any op is parsed.
TEST_F(PlanJson, RejectsTooManyOpsAndCreditsBeforeReading) {
  std::string ops = "{}";
  ops.reserve(3 * static_cast<size_t>(kMaxOpsPerRank) + 8);
  for (int64_t i = 0; i < kMaxOpsPerRank; ++i) ops += ",{}";
  std::string doc =
      R"({"format":"tessera-plan","version":1,"collective":"allreduce","nranks":1,"ranks":[{"workers":[)";
  expectRejected(doc + R"({"ops":[)" + ops + "]}]}]}",
                 "ranks[0].workers: 1048577 ops (at most 1048576)");
  // Split over two workers, counted together.
  expectRejected(doc + R"({"ops":[{}]},{"ops":[)" + ops.substr(3) + "]}]}]}",
                 "ranks[0].workers: 1048577 ops");
  // One credit per (peer, channel) at most: 2 ranks x 64 channels.
  std::string credits = R"({"peer":1,"channel":0,"initial":1})";
  for (int i = 0; i < 128; ++i) credits += R"(,{"peer":1,"channel":0,"initial":1})";
  expectRejected(
      R"({"format":"tessera-plan","version":1,"collective":"allreduce","nranks":2,"ranks":[{"credits":[)" +
          credits + R"(]},{}]})",
      "ranks[0].credits: 129 credits (at most 128)");
}

TEST_F(PlanJson, ShapeErrorsOnWriteToo) {
  Plan p = ringAllReduce(2);
  p.ranks[0].workers[0].ops[0].peer = 5;
  std::string text;
  EXPECT_EQ(planToJson(p, &text), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("ranks[0].workers[0].ops[0].peer"),
            std::string::npos);
}

TEST_F(PlanJson, WritesAndReadsFiles) {
  char dir[] = "/tmp/tessera_plan_json_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/ring.json";
  Plan p = ringAllReduce(4);
  ASSERT_EQ(writePlanFile(p, path), tsrSuccess) << lastErrorMessage();
  Plan back;
  ASSERT_EQ(readPlanFile(path, &back), tsrSuccess) << lastErrorMessage();
  EXPECT_TRUE(back == p);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), toJson(p));
  // Overwriting replaces the file whole; no temporary is left behind.
  ASSERT_EQ(writePlanFile(starBroadcast(2, 1, 1), path), tsrSuccess);
  ASSERT_EQ(readPlanFile(path, &back), tsrSuccess);
  EXPECT_EQ(back.collective, Collective::kBroadcast);
  EXPECT_EQ(writePlanFile(p, std::string(dir) + "/no/such/dir.json"), tsrSystemError);
  EXPECT_EQ(readPlanFile(std::string(dir) + "/missing.json", &back), tsrSystemError);
  EXPECT_NE(std::string(lastErrorMessage()).find("missing.json"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_EQ(rmdir(dir), 0) << "a temporary file was left in " << dir;
}

TEST(PlanJsonMissing, EveryFunctionSaysSo) {
  if (planJsonAvailable()) GTEST_SKIP() << "this build has nlohmann-json";
  Plan p = ringAllReduce(2);
  std::string text;
  EXPECT_EQ(planToJson(p, &text), tsrInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage())
                .find("built without JSON support (nlohmann-json not "
                      "found at configure time)"),
            std::string::npos);
  EXPECT_EQ(planFromJson("{}", "x", &p), tsrInvalidUsage);
  EXPECT_EQ(readPlanFile("/nonexistent.json", &p), tsrInvalidUsage);
  EXPECT_EQ(writePlanFile(p, "/tmp/never-written.json"), tsrInvalidUsage);
}

TEST(PlanShow, ListsRanksWorkersAndOps) {
  std::string s = showPlan(starBroadcast(2, 0, 1));
  EXPECT_NE(s.find("broadcast star (broadcast.star.n2): 2 ranks, chunksPerSegment 1, root 0"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("rank 0: scratch 0 segments, credit 1 from rank 1 channel 1\n  worker 0 (4 "
                   "ops)\n       0  wait rank 1 channel 1\n       1  put input[0] -> rank 1 "
                   "scratch[0]\n"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace tessera
