// The device backend (collectives/exec/device/device_backend.hpp) on host threads: every
// generated family's plans, bound by hand over host memory, run by DeviceItemRunner<HostGroup>
// with 1..3 CTAs per rank; outputs compared byte for byte with a serial reference computed by
// core's reduce functions (integer-valued inputs, so every reduction order gives the same bits).
// Also: peers reached only through a port channel (a test proxy that carries out triggers with
// memcpy), a rank whose peer never runs (tsrTimeout naming the peer), and refused items.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "core/datatype.hpp"
#include "tests/unit/collectives/test_device_backend_world.hpp"

namespace tessera::test {
namespace {

RedOpDesc opOf(RedKind kind, tsrDataType_t dtype) {
  RedOpDesc op;
  op.kind = kind;
  if (kind == RedKind::kPreMulSum) {
    op.dtype = dtype;
    op.scalarF = dtype == tsrUint8 || dtype == tsrUint32 || dtype == tsrUint64 ? 2.0 : -2.0;
    op.scalarInt = op.scalarF < 0 ? static_cast<uint64_t>(-2) : 2;
  }
  return op;
}

std::string describe(const WorldConfig& c) {
  return std::string(collectiveName(c.collective)) + " " + c.algorithm +
         " n=" + std::to_string(c.nranks) + " workers=" + std::to_string(c.workers) +
         " nctas=" + std::to_string(c.nctas) + " " + dtypeName(c.dtype) + " " +
         redKindName(c.op.kind) + " count=" + std::to_string(c.count) +
         (c.unmapped ? " unmapped" : "");
}

// Runs the world and checks every output; returns the number of iterations it ran.
uint64_t runAndCheck(const WorldConfig& cfg, uint32_t seed = 1) {
  SCOPED_TRACE(describe(cfg));
  World w(cfg);
  if (!w.setup()) return 0;
  w.fillInputs(seed);
  w.run();
  for (int r = 0; r < cfg.nranks; ++r) {
    RankState& st = w.rank(r);
    EXPECT_TRUE(st.ok) << "rank " << r << " failed: code " << st.error.code << " why "
                       << st.error.why << " worker " << st.error.worker << " op " << st.error.op
                       << " peer " << st.error.peer;
    if (!st.ok || !w.checksOutput(r)) continue;
    std::vector<uint8_t> want = w.expected(r);
    size_t bad = 0;
    const auto* got = reinterpret_cast<const uint8_t*>(st.output.data());
    while (bad < want.size() && want[bad] == got[bad]) ++bad;
    EXPECT_EQ(bad, want.size()) << "rank " << r << ": first differing byte";
  }
  return w.iters();
}

TEST(DeviceBackend, EveryFamilyAndCollective) {
  uint64_t maxIters = 0;
  for (const AlgorithmInfo& a : algorithms()) {
    if (a.needsHosts) continue;
    for (Collective c : a.collectives) {
      for (int n : {2, 3, 5}) {
        WorldConfig cfg;
        cfg.collective = c;
        cfg.algorithm = a.name;
        cfg.nranks = n;
        cfg.root = n - 1;
        cfg.count = 517;
        cfg.nctas = 1 + n % 3;
        cfg.dtype = tsrInt32;
        cfg.op = opOf(RedKind::kSum, cfg.dtype);
        maxIters = std::max(maxIters, runAndCheck(cfg, static_cast<uint32_t>(n)));
      }
    }
  }
  EXPECT_GT(maxIters, 2u);  // the small scratch really pipelines through several slices
}

TEST(DeviceBackend, DatatypesAndOps) {
  const tsrDataType_t types[] = {tsrFloat32, tsrInt32, tsrBfloat16, tsrFloat8e4m3, tsrFloat64};
  const RedKind kinds[] = {RedKind::kSum, RedKind::kMax, RedKind::kAvg, RedKind::kPreMulSum};
  for (tsrDataType_t t : types)
    for (RedKind k : kinds)
      for (Collective c :
           {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce}) {
        WorldConfig cfg;
        cfg.collective = c;
        cfg.algorithm = c == Collective::kAllReduce ? "rhd" : "ring";
        cfg.nranks = 4;
        cfg.root = 1;
        cfg.count = 300;
        cfg.nctas = 2;
        cfg.dtype = t;
        cfg.op = opOf(k, t);
        runAndCheck(cfg, 7);
      }
}

TEST(DeviceBackend, TwoWorkersOverCtas) {
  for (const char* algo : {"tree", "ring", "oneshot", "twoshot"})
    for (int nctas : {1, 2, 3}) {
      WorldConfig cfg;
      cfg.algorithm = algo;
      cfg.nranks = 4;
      cfg.workers = 2;
      cfg.nctas = nctas;
      cfg.count = 1000;
      cfg.dtype = tsrFloat32;
      cfg.op = opOf(RedKind::kSum, cfg.dtype);
      runAndCheck(cfg, 3);
    }
}

// Broadcast from rank 0 to rank 1 on one semaphore channel: put (staged, through the proxy),
// signal through the port, flush, copy its own output; rank 1 waits and copies out of its
// scratch.
std::shared_ptr<const Plan> portBroadcastPlan() {
  auto plan = std::make_shared<Plan>();
  plan->name = "broadcast.port.n2";
  plan->collective = Collective::kBroadcast;
  plan->algorithm = "custom";
  plan->nranks = 2;
  plan->chunksPerSegment = 4;
  plan->ranks.resize(2);
  plan->ranks[1].scratchSegments = 1;
  Op put;
  put.code = OpCode::kPut;
  put.dst = ChunkRef{1, BufferKind::kScratch, 0, 4};
  put.srcs = {ChunkRef{-1, BufferKind::kInput, 0, 4}};
  Op signal;
  signal.code = OpCode::kSignal;
  signal.peer = 1;
  Op flush;
  flush.code = OpCode::kFlush;
  flush.peer = 1;
  Op own;  // the root's own output
  own.code = OpCode::kCopy;
  own.dst = ChunkRef{-1, BufferKind::kOutput, 0, 4};
  own.srcs = {ChunkRef{-1, BufferKind::kInput, 0, 4}};
  plan->ranks[0].workers = {Worker{{put, signal, flush, own}}};
  Op wait;
  wait.code = OpCode::kWait;
  wait.peer = 0;
  Op copy;
  copy.code = OpCode::kCopy;
  copy.dst = ChunkRef{-1, BufferKind::kOutput, 0, 4};
  copy.srcs = {ChunkRef{-1, BufferKind::kScratch, 0, 4}};
  plan->ranks[1].workers = {Worker{{wait, copy}}};
  return plan;
}

TEST(DeviceBackend, UnmappedPeerThroughPortChannel) {
  for (int nctas : {1, 2}) {
    WorldConfig cfg;
    cfg.collective = Collective::kBroadcast;
    cfg.plan = portBroadcastPlan();
    cfg.nranks = 2;
    cfg.nctas = nctas;
    cfg.count = 700;
    cfg.scratchQuanta = 11;  // one slice holds all 700 floats
    cfg.unmapped = true;
    cfg.stagingBytes = 512;  // 256-byte pieces: the staging ring wraps (and flushes) often
    cfg.dtype = tsrFloat32;
    runAndCheck(cfg, 5);
  }
}

TEST(DeviceBackend, UnmappedRingSignalsOnEveryChannel) {
  // Ring plans signal on two channels per pair (data and acks); each semaphore has a port channel
  // of its own, so a signal on channel 1 lands on channel 1's counter at the peer (the test proxy
  // fails the FIFO if a signal goes through a put port). Small scratch: many iterations, so the
  // acks' credits run out and every later send waits for a signal that came through a port.
  for (Collective coll : {Collective::kAllGather, Collective::kAllReduce})
    for (int n : {2, 3})
      for (int nctas : {1, 2}) {
        WorldConfig cfg;
        cfg.collective = coll;
        cfg.nranks = n;
        cfg.nctas = nctas;
        cfg.workers = 2;
        cfg.count = 1500;
        cfg.unmapped = true;
        cfg.stagingBytes = 1024;
        cfg.op = opOf(RedKind::kSum, cfg.dtype);
        SCOPED_TRACE(describe(cfg));
        {
          World w(cfg);
          ASSERT_TRUE(w.setup());
          int multi = 0;  // peers this rank has more than one semaphore channel with
          const BoundPlan& bp = w.rank(0).bp;
          for (size_t s = 0; s < bp.peers.size(); ++s) {
            int channels = 0;
            for (const SemLink& sl : bp.sems) channels += sl.peerSlot == static_cast<int>(s);
            multi += channels > 1 ? 1 : 0;
          }
          EXPECT_GE(multi, 1) << "the plan no longer uses two channels per pair";
        }
        EXPECT_GT(runAndCheck(cfg, 7), 3u);
      }
}

TEST(DeviceBackend, MissingPeerTimesOut) {
  WorldConfig cfg;
  cfg.nranks = 2;
  cfg.timeoutNs = 50'000'000;  // 50 ms
  cfg.absent = {1};
  World w(cfg);
  ASSERT_TRUE(w.setup());
  w.fillInputs(1);
  auto start = std::chrono::steady_clock::now();
  w.run();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  RankState& st = w.rank(0);
  EXPECT_FALSE(st.ok);
  EXPECT_EQ(st.error.valid, 1u);
  EXPECT_EQ(st.error.code, static_cast<uint64_t>(tsrTimeout));
  EXPECT_EQ(st.error.why, exec::kWhyTimeout);
  EXPECT_EQ(st.error.peer, 1);
  EXPECT_GE(st.error.op, 0);
  EXPECT_LT(ms, 2000);
}

TEST(DeviceBackend, AbortIsRecordedAsAbort) {
  WorldConfig cfg;
  cfg.nranks = 2;
  cfg.absent = {1};
  World w(cfg);
  ASSERT_TRUE(w.setup());
  w.rank(0).abortFlag = 1;  // raised before the call: the first idle check gives up
  w.run();
  EXPECT_FALSE(w.rank(0).ok);
  // queueFailed sees the abort flag; the runner stops without recording a timeout.
  EXPECT_NE(w.rank(0).error.why, exec::kWhyTimeout);
}

TEST(DeviceBackend, NullUserBufferIsRefused) {
  WorldConfig cfg;
  cfg.nranks = 2;
  cfg.timeoutNs = 500'000'000;  // a rank that fails first leaves its peer waiting
  World w(cfg);
  ASSERT_TRUE(w.setup());
  w.rank(0).item.output = nullptr;
  w.rank(1).item.output = nullptr;
  w.run();
  // Both ranks store into their output; whichever gets there first refuses (the other may
  // time out waiting for it).
  int refused = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(w.rank(r).ok);
    if (w.rank(r).error.why == exec::kWhyBounds) {
      EXPECT_EQ(w.rank(r).error.code, static_cast<uint64_t>(tsrInvalidArgument));
      ++refused;
    }
  }
  EXPECT_GE(refused, 1);
}

}  // namespace
}  // namespace tessera::test
