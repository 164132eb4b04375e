// The plan IR: names and parsing, buffer layout per collective (the table in plan.hpp), chunk
// spans, checkPlanShape's rejections (each naming the path), describeOp.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"
#include "test_plan_plans.hpp"

namespace tessera {
namespace {

using namespace testplans;

TEST(PlanNames, ParseAndPrint) {
  for (int i = 0; i < kCollectiveCount; ++i) {
    Collective c = static_cast<Collective>(i), back{};
    ASSERT_EQ(collectiveParse(collectiveName(c), &back), tsrSuccess);
    EXPECT_EQ(back, c);
  }
  Collective c{};
  EXPECT_EQ(collectiveParse("All_Reduce", &c), tsrSuccess);
  EXPECT_EQ(c, Collective::kAllReduce);
  EXPECT_EQ(collectiveParse("REDUCE_SCATTER", &c), tsrSuccess);
  EXPECT_EQ(c, Collective::kReduceScatter);
  EXPECT_EQ(collectiveParse("all_to_all", &c), tsrSuccess);
  EXPECT_EQ(c, Collective::kAllToAll);
  EXPECT_EQ(collectiveParse("allsum", &c), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("valid: allreduce, reducescatter"),
            std::string::npos);
  for (int i = 0; i < kOpCodes; ++i) {
    OpCode op = static_cast<OpCode>(i), back{};
    ASSERT_EQ(opParse(opName(op), &back), tsrSuccess);
    EXPECT_EQ(back, op);
  }
  EXPECT_STREQ(opName(OpCode::kReduceSend), "reduceSend");
  OpCode op{};
  EXPECT_EQ(opParse("push", &op), tsrInvalidArgument);
  EXPECT_STREQ(bufferName(BufferKind::kScratch), "scratch");
  EXPECT_TRUE(collectiveReduces(Collective::kReduce));
  EXPECT_FALSE(collectiveReduces(Collective::kAllGather));
  EXPECT_TRUE(collectiveHasRoot(Collective::kBroadcast));
  EXPECT_FALSE(collectiveHasRoot(Collective::kAllToAll));
}

TEST(PlanLayout, SegmentsPerCollective) {
  struct Row {
    Collective c;
    int in, out;  // for 5 ranks, from the table in plan.hpp
  } rows[] = {{Collective::kAllReduce, 1, 1}, {Collective::kReduceScatter, 5, 1},
              {Collective::kAllGather, 1, 5}, {Collective::kBroadcast, 1, 1},
              {Collective::kReduce, 1, 1},    {Collective::kAllToAll, 5, 5}};
  for (const Row& r : rows) {
    SCOPED_TRACE(collectiveName(r.c));
    EXPECT_EQ(inputSegments(r.c, 5), r.in);
    EXPECT_EQ(outputSegments(r.c, 5), r.out);
    Plan p = emptyPlan(r.c, 5, 3);
    p.ranks[2].scratchSegments = 4;
    EXPECT_EQ(bufferChunks(p, 2, BufferKind::kInput), 3 * r.in);
    EXPECT_EQ(bufferChunks(p, 2, BufferKind::kOutput), 3 * r.out);
    EXPECT_EQ(bufferChunks(p, 2, BufferKind::kScratch), 12);
    EXPECT_EQ(bufferChunks(p, 1, BufferKind::kScratch), 0);
    EXPECT_EQ(bufferSegments(p, 7, BufferKind::kScratch), 0);  // no such rank
  }
}

TEST(PlanLayout, ChunkSpans) {
  // 10 elements in 4 chunks: ceil(10/4) = 3 per chunk: 3, 3, 3, 1.
  ChunkSpan s = chunkSpan(3, 4, 10);
  EXPECT_EQ(s.segment, 0);
  EXPECT_EQ(s.offset, 9u);
  EXPECT_EQ(s.length, 1u);
  s = chunkSpan(6, 4, 10);  // segment 1, position 2
  EXPECT_EQ(s.segment, 1);
  EXPECT_EQ(s.offset, 6u);
  EXPECT_EQ(s.length, 3u);
  // 5 elements in 4 chunks: 2, 2, 1, 0 (the last one empty).
  EXPECT_EQ(chunkSpan(2, 4, 5).length, 1u);
  EXPECT_EQ(chunkSpan(3, 4, 5).offset, 5u);
  EXPECT_EQ(chunkSpan(3, 4, 5).length, 0u);
  EXPECT_EQ(chunkSpan(0, 4, 0).length, 0u);
  // Every element lies in exactly one chunk, for many shapes.
  for (int cps : {1, 2, 3, 7, 16}) {
    for (uint64_t unit : {0u, 1u, 5u, 16u, 17u, 100u}) {
      uint64_t next = 0;
      for (int j = 0; j < cps; ++j) {
        ChunkSpan c = chunkSpan(j, cps, unit);
        EXPECT_EQ(c.offset, next);
        next += c.length;
      }
      EXPECT_EQ(next, unit) << cps << " " << unit;
    }
  }
  uint64_t max = ~uint64_t{0};  // no overflow even at the top of the range
  EXPECT_EQ(chunkSpan(2, 3, max).offset + chunkSpan(2, 3, max).length, max);
  EXPECT_EQ(chunkSpan(1, 3, max).offset, max / 3);  // 2^64 - 1 is a multiple of 3
  EXPECT_EQ(chunkSpan(1, 4, max).offset, max / 4 + 1);
  uint64_t huge = uint64_t{1} << 62;
  EXPECT_EQ(chunkSpan(4095, 4096, huge).offset + chunkSpan(4095, 4096, huge).length, huge);
}

void expectShapeError(const Plan& p, const std::string& words) {
  EXPECT_EQ(checkPlanShape(p), tsrInvalidArgument) << words;
  std::string why = lastErrorMessage();
  EXPECT_EQ(why.rfind("plan: ", 0), 0u) << why;
  EXPECT_NE(why.find(words), std::string::npos) << "\"" << words << "\" not in: " << why;
}

TEST(PlanShape, AcceptsGoodPlans) {
  EXPECT_EQ(checkPlanShape(ringAllReduce(4)), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(checkPlanShape(starBroadcast(3, 2, 4)), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(checkPlanShape(getAllGather(3, 2)), tsrSuccess) << lastErrorMessage();
  Plan idle = emptyPlan(Collective::kAllReduce, 2, 1);
  idle.ranks[1].workers.clear();  // a rank with no workers is allowed (it does nothing)
  EXPECT_EQ(checkPlanShape(idle), tsrSuccess);
}

TEST(PlanShape, RejectsBadSizes) {
  Plan p = ringAllReduce(3);
  p.nranks = 0;
  expectShapeError(p, strprintf("nranks: 0 out of range (1..%d)", kMaxPlanRanks));
  p = ringAllReduce(3);
  p.nranks = 4;
  expectShapeError(p, "ranks: 3 rank plans for nranks 4");
  p = ringAllReduce(3);
  p.root = 3;
  expectShapeError(p, "root: rank 3 out of range");
  p.root = -1;
  expectShapeError(p, "root: rank -1 out of range");
  p = ringAllReduce(3);
  p.chunksPerSegment = kMaxChunksPerSegment + 1;
  expectShapeError(p, "chunksPerSegment: 4097 out of range");
  p = ringAllReduce(3);
  p.ranks[1].scratchSegments = -1;
  expectShapeError(p, "ranks[1].scratchSegments: -1 out of range");
  p = ringAllReduce(3);
  p.ranks[2].workers.resize(kMaxWorkers + 1);
  expectShapeError(p, "ranks[2].workers: 65 workers (at most 64)");
  p = emptyPlan(Collective::kAllReduce, 1, 1);
  p.ranks[0].workers[0].ops.resize(static_cast<size_t>(kMaxOpsPerRank / 2) + 1);
  p.ranks[0].workers.push_back(p.ranks[0].workers[0]);
  expectShapeError(p, "ranks[0].workers: 1048578 ops (at most 1048576)");
}

TEST(PlanShape, RejectsBadRefs) {
  auto broken = [](auto edit) {
    Plan p = ringAllReduce(3);
    edit(p.ranks[1].workers[0].ops);
    return p;
  };
  // ops[1] is rank 1's first put input[1] -> rank 2 scratch[0]; ops[4] its first reduce.
  expectShapeError(broken([](auto& o) { o[1].srcs[0].index = 3; }),
                   "ranks[1].workers[0].ops[1].src.index: chunk 3 out of range (input has 3 "
                   "chunks)");
  expectShapeError(broken([](auto& o) { o[1].srcs[0].index = -1; }),
                   "ops[1].src.index: chunk -1 out of range");
  expectShapeError(broken([](auto& o) { o[1].srcs[0].count = 0; }),
                   "ops[1].src.count: 0 chunks (must be at least 1)");
  expectShapeError(broken([](auto& o) {
                     o[1].srcs[0].index = 2;
                     o[1].srcs[0].count = INT32_MAX;
                     o[1].dst.count = INT32_MAX;
                   }),
                   "ops[1].dst.count: chunks 0..2147483646 out of range (scratch has 6 chunks)");
  expectShapeError(broken([](auto& o) { o[4].srcs[1].index = INT32_MAX; }),
                   "ranks[1].workers[0].ops[4].srcs[1].index: chunk 2147483647 out of range");
  expectShapeError(broken([](auto& o) { o[4].srcs[1].count = 2; }),
                   "ops[4].srcs[1].count: 2 chunks but dst has 1");
  expectShapeError(broken([](auto& o) { o[1].dst.rank = 1; }),
                   "ops[1].dst.rank: 1 is the rank itself");
  expectShapeError(broken([](auto& o) { o[1].dst.rank = 3; }),
                   "ops[1].dst.rank: rank 3 out of range (3 ranks)");
  expectShapeError(broken([](auto& o) { o[1].dst.rank = -2; }), "ops[1].dst.rank: rank -2");
  expectShapeError(broken([](auto& o) { o[1].dst = remote(2, kOut, 0); }),
                   "ops[1].dst: reaches rank 2's output but the plan is not marked zeroCopy");
  expectShapeError(broken([](auto& o) { o[4].dst = local(kIn, 0); }),
                   "ops[4].dst.buffer: writes an input buffer");
}

// Executors size a user chunk by its position (index % cps), so input and output refs of one op
// must agree on it; scratch slots may hold any position.
TEST(PlanShape, UserRefsShareTheChunkPosition) {
  Plan p = ringAllReduce(3);  // cps 3; rank 1's ops[4] is reduce(input[0], scratch[0]) -> output[0]
  ASSERT_EQ(p.ranks[1].workers[0].ops[4].dst, local(kOut, 0));
  p.ranks[1].workers[0].ops[4].dst.index = 1;
  expectShapeError(p,
                   "ranks[1].workers[0].ops[4].srcs: input[0] is at chunk position 0 but "
                   "output[1] at position 1");
  p.ranks[1].workers[0].ops[4].dst.index = 0;
  p.ranks[1].workers[0].ops[4].srcs[1].index = 2;  // a scratch slot at another position: fine
  EXPECT_EQ(checkPlanShape(p), tsrSuccess) << lastErrorMessage();
  // Same position in another segment is fine (allgather: output[r * cps + j] <- input[j]).
  Plan g = emptyPlan(Collective::kAllGather, 2, 2);
  g.ranks[0].workers[0].ops = {copy(local(kIn, 1), local(kOut, 3))};
  EXPECT_EQ(checkPlanShape(g), tsrSuccess) << lastErrorMessage();
  g.ranks[0].workers[0].ops = {copy(local(kIn, 1), local(kOut, 2))};
  expectShapeError(g, "ops[0].src: input[1] is at chunk position 1 but output[2] at position 0");
}

TEST(PlanShape, RejectsBadOperandsAndRemoteRules) {
  auto broken = [](auto edit) {
    Plan p = ringAllReduce(3);
    p.zeroCopy = true;
    edit(p.ranks[1].workers[0].ops);
    return p;
  };
  expectShapeError(broken([](auto& o) { o[1].srcs.clear(); }),
                   "ops[1].srcs: a put takes exactly 1 source, found 0");
  expectShapeError(broken([](auto& o) { o[4].srcs.resize(1); }),
                   "ops[4].srcs: a reduce takes 2..1024 sources, found 1");
  expectShapeError(broken([](auto& o) { o[4].srcs.resize(kMaxSrcs + 1, o[4].srcs[0]); }),
                   "found 1025");
  expectShapeError(broken([](auto& o) { o[1].srcs[0].rank = 0; }),
                   "ops[1].src.rank: a put reads a local source");
  expectShapeError(broken([](auto& o) { o[1].dst.rank = -1; }),
                   "ops[1].dst.rank: a put writes a peer's buffer");
  expectShapeError(broken([](auto& o) { o[1] = get(local(kIn, 0), local(kOut, 0)); }),
                   "ops[1].src.rank: a get reads a peer's buffer");
  expectShapeError(broken([](auto& o) { o[1] = get(remote(0, kIn, 0), remote(2, kOut, 0)); }),
                   "ops[1].dst.rank: a get writes a local buffer, found rank 2");
  expectShapeError(broken([](auto& o) { o[1] = copy(remote(0, kIn, 0), remote(2, kOut, 0)); }),
                   "ops[1].dst.rank: a copy writes a local buffer");
  expectShapeError(broken([](auto& o) { o[4].dst.rank = 2; }),
                   "ops[4].dst.rank: a reduce writes a local buffer");
  expectShapeError(broken([](auto& o) { o[4].code = OpCode::kReduceSend; }),
                   "ops[4].dst.rank: a reduceSend writes a peer's buffer");
  expectShapeError(broken([](auto& o) {
                     o[4].code = OpCode::kReduceSend;
                     o[4].dst.rank = 2;
                     o[4].hasDst2 = true;
                     o[4].dst2 = remote(0, kOut, 0);
                   }),
                   "ops[4].dst2.rank: dst2 must be local");
  expectShapeError(broken([](auto& o) { o[4].hasDst2 = true; }),
                   "ops[4].dst2: only put and reduceSend take dst2");
  expectShapeError(broken([](auto& o) { o[4].dst2.index = 1; }),
                   "ops[4].dst2: set but hasDst2 is false");
  expectShapeError(broken([](auto& o) { o[1].peer = 2; }), "ops[1].peer: a put takes no peer");
  expectShapeError(broken([](auto& o) { o[2].srcs.push_back(local(kIn, 0)); }),
                   "ops[2]: a signal takes no chunk refs");
}

TEST(PlanShape, RejectsBadPeersChannelsCredits) {
  Plan p = ringAllReduce(3);
  p.ranks[0].workers[0].ops[2].peer = 0;
  expectShapeError(p, "ranks[0].workers[0].ops[2].peer: peer 0 invalid for rank 0");
  p = ringAllReduce(3);
  p.ranks[0].workers[0].ops[2].channel = kMaxChannels;
  expectShapeError(p, "ops[2].channel: channel 64 out of range (0..63)");
  p = ringAllReduce(3);
  p.ranks[0].workers[0].ops.push_back(flush(1));
  p.ranks[0].workers[0].ops.back().channel = 1;
  expectShapeError(p, "ops[24].channel: a flush takes no channel");
  p = ringAllReduce(3);
  Op b = barrier();
  b.peer = 1;
  p.ranks[0].workers[0].ops.push_back(b);
  expectShapeError(p, "ops[24]: a barrier takes no peer or channel");
  p = ringAllReduce(3);
  p.ranks[2].credits[0].peer = 2;
  expectShapeError(p, "ranks[2].credits[0].peer: peer 2 invalid for rank 2");
  p.ranks[2].credits[0] = Credit{0, 1, (1 << 20) + 1};
  expectShapeError(p, "ranks[2].credits[0].initial: 1048577 out of range");
  p.ranks[2].credits[0] = Credit{0, -1, 1};
  expectShapeError(p, "ranks[2].credits[0].channel: channel -1 out of range");
  p.ranks[2].credits = {Credit{0, 1, 1}, Credit{0, 1, 2}};
  expectShapeError(p, "ranks[2].credits[1]: a second credit for (peer 0, channel 1)");
}

TEST(PlanShape, RootOnlyBuffers) {
  Plan p = starBroadcast(3, 1, 1);
  p.ranks[0].workers[0].ops[1] = copy(local(kIn, 0), local(kOut, 0));
  expectShapeError(p,
                   "ranks[0].workers[0].ops[1].src: reads rank 0's input, but a broadcast "
                   "has an input only at the root (rank 1)");
  Plan r = emptyPlan(Collective::kReduce, 2, 1);
  r.root = 1;
  r.ranks[0].workers[0].ops = {copy(local(kIn, 0), local(kOut, 0))};
  expectShapeError(r,
                   "ranks[0].workers[0].ops[0].dst: writes rank 0's output, but a reduce has "
                   "an output only at the root (rank 1)");
}

TEST(PlanDescribe, OneLinePerOp) {
  EXPECT_EQ(describeOp(put(local(kIn, 3), remote(2, kScr, 3, 2))),
            "put input[3] -> rank 2 scratch[3..4]");
  Op rs = dataOp(OpCode::kReduceSend, {local(kIn, 0), remote(1, kOut, 2)}, remote(3, kScr, 0));
  rs.hasDst2 = true;
  rs.dst2 = local(kOut, 0);
  EXPECT_EQ(describeOp(rs),
            "reduceSend input[0] + rank 1 output[2] -> rank 3 scratch[0] and "
            "output[0]");
  EXPECT_EQ(describeOp(signal(2, 5)), "signal rank 2 channel 5");
  EXPECT_EQ(describeOp(wait(0)), "wait rank 0 channel 0");
  EXPECT_EQ(describeOp(flush(4)), "flush rank 4");
  EXPECT_EQ(describeOp(barrier()), "barrier");
}

}  // namespace
}  // namespace tessera
