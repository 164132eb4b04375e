// The device executor emulated on host threads (EngineOptions::deviceEmulation): every collective,
// datatype and op through enqueue + deviceSynchronize on thread ranks, forced algorithms, forked
// processes over shm and ucx (port channels), launch mode. Each result must equal the host
// executor's bit for bit and the serial reference.
#include <gtest/gtest.h>

#include "collectives/exec/planner.hpp"
#include "support/harness.hpp"
#include "test_device_emulation_common.hpp"
#include "test_exec_common.hpp"
#include "transport/transport.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::devtest {
namespace {

using test::RankMode;

const tsrDataType_t kTypes[] = {tsrFloat32, tsrBfloat16, tsrFloat8e5m2, tsrInt32, tsrFloat64};
const RedKind kOps[] = {RedKind::kSum, RedKind::kProd, RedKind::kMax,
                        RedKind::kMin, RedKind::kAvg,  RedKind::kPreMulSum};

// Every collective x datatype x op (reducing ones) on this rank, tuner's choice of algorithm.
std::string everyCollective(CollectiveEngine& e, int rank, int n) {
  int salt = 0;
  for (tsrDataType_t t : kTypes) {
    for (Collective coll :
         {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce}) {
      for (RedKind op : kOps) {
        DevCase c{coll, "", t, op, 700, coll == Collective::kReduce ? n - 1 : 0, false, ++salt};
        std::string err = runDeviceCase(e, rank, n, c);
        if (!err.empty()) return err;
      }
    }
    for (Collective coll : {Collective::kAllGather, Collective::kAllToAll}) {
      DevCase c{coll, "", t, RedKind::kSum, 500, 0, false, ++salt};
      std::string err = runDeviceCase(e, rank, n, c);
      if (!err.empty()) return err;
    }
    for (int root : {0, n - 1}) {
      DevCase c{Collective::kBroadcast, "", t, RedKind::kSum, 900, root, false, ++salt};
      std::string err = runDeviceCase(e, rank, n, c);
      if (!err.empty()) return err;
    }
  }
  // In place, and a count that is not a multiple of anything.
  DevCase c{Collective::kAllReduce, "", tsrFloat32, RedKind::kSum, 1237, 0, true, ++salt};
  return runDeviceCase(e, rank, n, c);
}

TEST(DeviceEmulation, EveryCollectiveOnThreadRanks) {
  for (int n : {2, 3, 4}) {
    for (int ctas : {1, 2}) {
      auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
        std::unique_ptr<CollectiveEngine> e;
        DevSetup setup;
        setup.ctas = ctas;
        TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
        std::string err = everyCollective(*e, ctx.rank(), ctx.nranks());
        if (!err.empty()) return strprintf("ctas=%d: ", ctas) + err;
        return std::string();
      });
      test::expectAllRanksOk(results);
    }
  }
}

TEST(DeviceEmulation, ForcedAlgorithms) {
  for (int n : {3, 4}) {
    std::vector<std::string> skipped;
    std::vector<exectest::Usable> plans = exectest::usablePlans(n, {}, &skipped);
    auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      TT_CHECK_OK(makeDeviceEngine(ctx, DevSetup{}, &e));
      int salt = 0, ran = 0;
      for (const exectest::Usable& u : plans) {
        if (u.family == "hier") continue;  // needs several hosts
        for (tsrDataType_t t : {tsrFloat32, tsrBfloat16}) {
          DevCase c{u.coll, u.family, t, RedKind::kSum, 2000, u.root, false, ++salt};
          std::string err = runDeviceCase(*e, ctx.rank(), n, c);
          if (!err.empty()) return err;
          ++ran;
        }
      }
      TT_CHECK(ran >= 10, "only %d forced cases ran", ran);
      return std::string();
    });
    test::expectAllRanksOk(results);
  }
}

// A few collectives on forked processes: mapped peers over shm, or port channels over ucx.
void overProcesses(int n) {
  auto results = test::runTransportRanks(RankMode::kProcesses, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    DevSetup setup;
    setup.timeoutSeconds = 5;
    TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
    int salt = 0;
    for (Collective coll :
         {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
          Collective::kBroadcast, Collective::kReduce, Collective::kAllToAll}) {
      for (tsrDataType_t t : {tsrFloat32, tsrBfloat16}) {
        DevCase c{coll, "", t, RedKind::kSum, 3000, n - 1, false, ++salt};
        std::string err = runDeviceCase(*e, ctx.rank(), n, c);
        if (!err.empty()) return err;
      }
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceEmulation, ProcessesOverShm) { overProcesses(2); }

// Every peer unmapped: puts and signals are proxy triggers. Ring and one-shot plans signal on two
// channels per pair (each semaphore has its own port channel), and the broadcast root has no
// scratch (its credits come back through a port channel over the semaphore's memory).
TEST(DeviceEmulation, ProcessesOverUcxPortChannels) {
  std::string why;
  if (!transportBuilt(TransportKind::kUcx, &why)) GTEST_SKIP() << "ucx: " << why;
  test::ScopedEnv transport("TESSERA_TRANSPORT", "ucx");
  test::ScopedEnv tls("UCX_TLS", "tcp");
  overProcesses(2);
}

// The planner gives the device ring one worker (one ring) per CTA, each with a piece of every
// block; other families and the host executor keep theirs.
TEST(DevicePlanner, RingGetsARingPerCta) {
  TuneChoice ring;
  ring.algorithm = "ring";
  const PlanKey dev =
      planKeyOf(ExecKind::kDevice, Collective::kAllReduce, 0, Staging::kScratch, ring, 8);
  EXPECT_EQ(dev.workers, 8);
  EXPECT_GE(dev.pipeline, 8);
  EXPECT_FALSE(dev.zeroCopy);
  const PlanKey host =
      planKeyOf(ExecKind::kHost, Collective::kAllReduce, 0, Staging::kScratch, ring, 0);
  EXPECT_EQ(host.workers, 1);
  EXPECT_EQ(host.pipeline, 1);
  TuneChoice tree;
  tree.algorithm = "tree";
  tree.workers = 2;
  EXPECT_EQ(
      planKeyOf(ExecKind::kDevice, Collective::kAllReduce, 0, Staging::kScratch, tree, 8).workers,
      2);
}

// The planner feeds the tuner's device model its grid, scratch and NICs (Planner::setDevice): a
// 1 GiB all-reduce on two DGX-like hosts (cuda_ipc within, 8 CTAs, 64 MiB, 8 NICs) gets the ring
// with a ring per CTA; a planner not told of them (one NIC per host, no scratch) chooses another
// family for the same call.
TEST(DevicePlanner, DeviceChoicesSeeTheGridTheScratchAndTheNics) {
  std::vector<int> hostOf;
  for (int r = 0; r < 16; ++r) hostOf.push_back(r / 8);
  const TransportClasses classes{TransportKind::kCudaIpc, TransportKind::kUcx};
  Planner rails;
  ASSERT_EQ(rails.init(0, 16, hostOf), tsrSuccess) << lastErrorMessage();
  rails.setDevice(uint64_t{64} << 20, 8);
  PlanChoice* choice = nullptr;
  ASSERT_EQ(rails.choose(ExecKind::kDevice, Collective::kAllReduce, size_t{1} << 30, 0,
                         Staging::kScratch, classes, 8, &choice),
            tsrSuccess)
      << lastErrorMessage();
  ASSERT_NE(choice->plan, nullptr);
  EXPECT_EQ(choice->plan->algorithm, "ring");
  EXPECT_EQ(choice->plan->ranks[0].workers.size(), 8u);
  Planner oneNic;  // the same without the device's scratch and NICs
  ASSERT_EQ(oneNic.init(0, 16, hostOf), tsrSuccess);
  PlanChoice* other = nullptr;
  ASSERT_EQ(oneNic.choose(ExecKind::kDevice, Collective::kAllReduce, size_t{1} << 30, 0,
                          Staging::kScratch, classes, 8, &other),
            tsrSuccess);
  // One NIC per host: 8 crossing rings would share it, so the ring must not win there.
  EXPECT_NE(other->plan->algorithm, "ring") << other->plan->name;
  TuneInput in =
      rails.tuneInput(Collective::kAllReduce, size_t{1} << 30, 0, classes, ExecKind::kDevice);
  EXPECT_EQ(in.scratchBytes, uint64_t{64} << 20);  // setDevice reaches every device input
  EXPECT_EQ(in.nicsPerHost, 8);
  EXPECT_FALSE(in.devicePcie);
  rails.setDevice(uint64_t{64} << 20, 8, true);  // some GPUs of a host joined by PCIe only
  EXPECT_TRUE(
      rails.tuneInput(Collective::kAllReduce, size_t{1} << 30, 0, classes, ExecKind::kDevice)
          .devicePcie);
  rails.setDevice(uint64_t{64} << 20, 8);
  in.workers = 8;
  TuneInput single = in;
  single.nicsPerHost = 1;
  EXPECT_GT(rails.tuner().predictUs(single, "ring", 8), rails.tuner().predictUs(in, "ring", 8));
}

// The staged rings as the device executor runs them by default (a ring per CTA, messages cycling
// two slots per phase under credits), through a scratch so small that a call takes tens of
// slices, at 2, 4 and 8 thread ranks (the all-reduce also in place), against the host executor
// and the serial reference.
TEST(DeviceEmulation, RingPerCtaThroughASmallScratch) {
  test::ScopedEnv algo("TESSERA_ALGO", "allreduce:ring;reducescatter:ring;allgather:ring");
  for (int n : {2, 4, 8}) {
    auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      DevSetup setup;
      setup.ctas = 4;
      setup.scratchBytes = 4096;
      TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
      int salt = 0;
      for (Collective coll :
           {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather})
        for (bool inPlace : {false, true}) {
          // The harness's in place is the all-reduce's (send and receive buffers the same).
          if (inPlace && coll != Collective::kAllReduce) continue;
          DevCase c{coll, "", tsrFloat32, RedKind::kSum, 20011, 0, inPlace, ++salt};
          std::string err = runDeviceCase(*e, ctx.rank(), n, c);
          if (!err.empty()) return err;
        }
      return std::string();
    });
    test::expectAllRanksOk(results);
  }
}

TEST(DeviceEmulation, LaunchMode) {
  test::ScopedEnv launch("TESSERA_LAUNCH", "kernel");
  auto results = test::runTransportRanks(RankMode::kThreads, 3, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeDeviceEngine(ctx, DevSetup{}, &e));
    int salt = 0;
    for (Collective coll :
         {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
          Collective::kBroadcast, Collective::kReduce, Collective::kAllToAll}) {
      for (RedKind op : {RedKind::kSum, RedKind::kAvg}) {
        DevCase c{coll, "", tsrFloat32, op, 2500, 1, false, ++salt};
        std::string err = runDeviceCase(*e, ctx.rank(), 3, c);
        if (!err.empty()) return err;
      }
    }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::devtest
