#include "tests/unit/collectives/test_device_backend_world.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "collectives/algorithms/algorithms.hpp"
#include "core/datatype.hpp"
#include "tests/support/harness.hpp"

namespace tessera::test {
namespace {

// v (a small integer) as one element of `dtype`.
void putValue(tsrDataType_t dtype, void* base, size_t i, int v) {
  dtypeVisit(dtype, [&](auto t) {
    using T = decltype(t);
    T x;
    if constexpr (std::is_arithmetic_v<T>)
      x = static_cast<T>(v);
    else
      x = T::fromFloat(static_cast<float>(v));
    std::memcpy(static_cast<char*>(base) + i * sizeof(T), &x, sizeof(T));
    return 0;
  });
}

size_t words(uint64_t bytes) { return static_cast<size_t>((bytes + 7) / 8); }

// Proxy channel ids of the test double: a peer's put port is its slot, semaphore i's port is
// kSemPortBase + i.
constexpr uint32_t kSemPortBase = 1000;

}  // namespace

uint64_t World::outputBytes() const {
  return static_cast<uint64_t>(outputSegments(cfg_.collective, cfg_.nranks)) * cfg_.count * elem_;
}

bool World::setup() {
  GenParams gp;
  gp.collective = cfg_.collective;
  gp.algorithm = cfg_.algorithm;
  gp.nranks = cfg_.nranks;
  gp.root = cfg_.root;
  gp.workers = cfg_.workers;
  auto plan = std::make_shared<Plan>();
  if (cfg_.plan) {
    plan_ = cfg_.plan;
  } else if (generatePlan(gp, plan.get()) != tsrSuccess) {
    ADD_FAILURE() << "generatePlan " << cfg_.algorithm;
    return false;
  } else {
    plan_ = plan;
  }
  elem_ = dtypeSize(cfg_.dtype);
  const int n = cfg_.nranks;
  for (int r = 0; r < n; ++r) {
    ranks_.push_back(std::make_unique<RankState>());
    if (compilePlan(plan_, r, &ranks_.back()->bp) != tsrSuccess) {
      ADD_FAILURE() << "compilePlan rank " << r;
      return false;
    }
  }
  // The slice, as host_executor.cpp's choosePlan, for a scratch of scratchQuanta quanta.
  const BoundPlan& b0 = ranks_[0]->bp;
  const uint64_t quantum = static_cast<uint64_t>(b0.cps) * (64 / elem_);
  // A slot of scratchQuanta lines for every scratch chunk the plan names (ops.hpp, sliceElements).
  const uint64_t chunks = static_cast<uint64_t>(std::max(b0.scratchChunks, 1));
  const uint64_t scratchBytes = chunks * cfg_.scratchQuanta * 64;
  slice_ = b0.scratchChunks > 0 ? cfg_.scratchQuanta * quantum : cfg_.count;
  iters_ = (cfg_.count + slice_ - 1) / slice_;
  // Counters of every semaphore first: the maps must not grow while ranks run.
  for (int r = 0; r < n; ++r)
    for (const SemLink& s : ranks_[static_cast<size_t>(r)]->bp.sems) {
      int p = ranks_[static_cast<size_t>(r)]->bp.peers[static_cast<size_t>(s.peerSlot)].peer;
      counters_[{r, p, s.channel}] = 0;
      expected_[{r, p, s.channel}] = 0;
    }
  for (int r = 0; r < n; ++r) {
    RankState& st = *ranks_[static_cast<size_t>(r)];
    st.scratch.assign(words(scratchBytes), 0);
    st.input.assign(words(inputSegments(cfg_.collective, n) * cfg_.count * elem_), 0);
    st.output.assign(words(outputBytes()), 0);
    st.triggers.assign(64, device::ProxyTrigger{});
  }
  for (int r = 0; r < n; ++r) {
    RankState& st = *ranks_[static_cast<size_t>(r)];
    BoundPlan& bp = st.bp;
    bool anyPort = false;
    for (size_t s = 0; s < bp.peers.size(); ++s) {
      const int p = bp.peers[s].peer;
      exec::DevicePeer dp{};
      dp.rank = p;
      dp.scratchBytes = scratchBytes;
      dp.mapped = cfg_.unmapped ? 0 : 1;
      if (!cfg_.unmapped) {
        dp.scratch = reinterpret_cast<char*>(ranks_[static_cast<size_t>(p)]->scratch.data());
      } else {
        anyPort = true;
        dp.hasPort = 1;
        dp.putPort = 1;
        // No doorbell: the test's own proxy loop polls.
        dp.port.fifo =
            device::FifoDeviceHandle{st.triggers.data(), &st.head, &st.tail, &st.fifoError, 64,
                                     cfg_.timeoutNs,     nullptr,  nullptr};
        dp.port.channel = static_cast<uint32_t>(s);
        dp.port.remoteBytes = scratchBytes;
        dp.port.localBytes = cfg_.stagingBytes * static_cast<uint64_t>(cfg_.nctas);
      }
      st.peers.push_back(dp);
    }
    for (const SemLink& sl : bp.sems) {
      const int p = bp.peers[static_cast<size_t>(sl.peerSlot)].peer;
      exec::DeviceSem ds{};
      ds.handle.inbound = counter(r, p, sl.channel);
      ds.handle.expected = &expected_[{r, p, sl.channel}];
      ds.handle.remoteInbound = cfg_.unmapped ? nullptr : counter(p, r, sl.channel);
      ds.credits = sl.credits;
      ds.peerSlot = static_cast<int16_t>(sl.peerSlot);
      ds.channel = static_cast<int16_t>(sl.channel);
      ds.mapped = cfg_.unmapped ? 0 : 1;
      if (cfg_.unmapped) {
        // As device_bind.cpp: a port channel of its own per semaphore, on the rank's one FIFO;
        // the test proxy tells it from the peers' put ports by its id.
        ds.hasPort = 1;
        ds.port = st.peers[static_cast<size_t>(sl.peerSlot)].port;
        ds.port.channel = kSemPortBase + static_cast<uint32_t>(st.sems.size());
      }
      st.sems.push_back(ds);
    }
    st.barrierCounts.assign(static_cast<size_t>(bp.workers()), 0);
    if (anyPort) st.staging.assign(words(cfg_.stagingBytes * static_cast<uint64_t>(cfg_.nctas)), 0);
    exec::DevicePlan& d = st.dp;
    d.ops = bp.ops.data();
    d.refs = bp.refs.data();
    d.workerBegin = bp.workerBegin.data();
    d.planOpIndex = bp.planOpIndex.data();
    d.workers = bp.workers();
    d.cps = bp.cps;
    d.maxSrcs = bp.maxSrcs;
    d.scratchChunks = bp.scratchChunks;
    d.rank = r;
    d.nranks = n;
    d.scratch = reinterpret_cast<char*>(st.scratch.data());
    d.scratchBytes = scratchBytes;
    d.peers = st.peers.data();
    d.npeers = static_cast<int32_t>(st.peers.size());
    d.nsems = static_cast<int32_t>(st.sems.size());
    d.sems = st.sems.data();
    d.barrierCounts = st.barrierCounts.data();
    d.staging = anyPort ? reinterpret_cast<char*>(st.staging.data()) : nullptr;
    d.stagingBytes = anyPort ? cfg_.stagingBytes : 0;
    d.anyUnmapped = anyPort ? 1 : 0;
    st.queue.posted = &st.posted;
    st.queue.consumed = &st.consumed;
    st.queue.abortFlag = &st.abortFlag;
    st.queue.stopFlag = &st.stopFlag;
    st.queue.error = &st.error;
    st.queue.grid = &st.grid;
    st.queue.timeoutNs = cfg_.timeoutNs;
    exec::WorkItem& it = st.item;
    it.plan = &st.dp;
    it.input = reinterpret_cast<const char*>(st.input.data());
    it.output = reinterpret_cast<char*>(st.output.data());
    it.count = cfg_.count;
    it.slice = slice_;
    it.iters = iters_;
    it.kind = exec::kItemRun;
    it.dtype = static_cast<uint8_t>(cfg_.dtype);
    it.redKind = static_cast<uint8_t>(cfg_.op.kind);
    it.preOp = cfg_.op.kind == RedKind::kPreMulSum ? 1 : 0;
    it.postAvg =
        collectiveReduces(cfg_.collective) && cfg_.op.kind == RedKind::kAvg && checksOutput(r) ? 1
                                                                                               : 0;
    dtypeVisit(cfg_.dtype, [&](auto t) {
      using T = decltype(t);
      auto scalar = preMulScalar<T>(cfg_.op);
      std::memcpy(&it.scalarBits, &scalar, sizeof(scalar));
      return 0;
    });
  }
  return true;
}

void World::fillInputs(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-2, 2);
  const bool isSigned =
      cfg_.dtype != tsrUint8 && cfg_.dtype != tsrUint32 && cfg_.dtype != tsrUint64;
  for (auto& st : ranks_) {
    size_t n = static_cast<size_t>(inputSegments(cfg_.collective, cfg_.nranks) * cfg_.count);
    for (size_t i = 0; i < n; ++i)
      putValue(cfg_.dtype, st->input.data(), i, isSigned ? d(rng) : d(rng) + 2);
    std::memset(st->output.data(), 0xEE, outputBytes());
  }
}

void World::proxy(int r, const std::atomic<bool>& stop) {
  RankState& st = rank(r);
  for (uint32_t iter = 0; !stop.load(std::memory_order_acquire);) {
    device::ProxyTrigger& t = st.triggers[st.tail % st.triggers.size()];
    uint64_t control = __atomic_load_n(&t.control, __ATOMIC_ACQUIRE);
    if (control == 0) {
      device::backoff(iter++);
      continue;
    }
    iter = 0;
    const uint32_t op = device::triggerOp(control);
    const uint32_t channel = device::triggerChannel(control);
    // Put ports are numbered by peer slot, semaphore ports kSemPortBase + semaphore index.
    const exec::DeviceSem* sem =
        channel >= kSemPortBase ? &st.sems[channel - kSemPortBase] : nullptr;
    const auto slot = sem != nullptr ? static_cast<size_t>(sem->peerSlot) : channel;
    const int p = st.bp.peers[slot].peer;
    if (op & device::kTriggerPut)
      std::memcpy(reinterpret_cast<char*>(rank(p).scratch.data()) + t.dstOffset,
                  reinterpret_cast<char*>(st.staging.data()) + t.srcOffset, t.bytes);
    if (op & device::kTriggerSignal) {
      // A port channel's signal adds to the semaphore it was made with. The backend must signal
      // only through semaphore ports: a signal on a put port fails the FIFO (the runner then
      // records kWhyPort with this code).
      if (sem != nullptr)
        __atomic_fetch_add(counter(p, r, sem->channel), 1, __ATOMIC_RELEASE);
      else
        __atomic_store_n(&st.fifoError, static_cast<uint64_t>(tsrInternalError), __ATOMIC_RELEASE);
    }
    t.control = 0;
    __atomic_store_n(&st.tail, st.tail + 1, __ATOMIC_RELEASE);
  }
}

void World::run() {
  const int n = cfg_.nranks;
  std::atomic<bool> stop{false};
  std::vector<std::thread> proxies;
  if (cfg_.unmapped)
    for (int r = 0; r < n; ++r) proxies.emplace_back([this, r, &stop] { proxy(r, stop); });
  std::vector<std::atomic<int>> fails(static_cast<size_t>(n));
  runRanks(
      n * cfg_.nctas,
      [&](int t) {
        const int r = t / cfg_.nctas;
        const auto cta = static_cast<uint32_t>(t % cfg_.nctas);
        for (int a : cfg_.absent)
          if (a == r) return;
        RankState& st = rank(r);
        exec::DeviceItemRunner<exec::HostGroup> runner{st.queue};
        exec::HostGroup g;
        if (!runner.runItem(st.item, g, cta, static_cast<uint32_t>(cfg_.nctas)))
          fails[static_cast<size_t>(r)].fetch_add(1);
      },
      30);
  stop.store(true, std::memory_order_release);
  for (auto& th : proxies) th.join();
  for (int r = 0; r < n; ++r) rank(r).ok = fails[static_cast<size_t>(r)].load() == 0;
}

std::vector<uint8_t> World::expected(int r) const {
  const int n = cfg_.nranks;
  const size_t seg = static_cast<size_t>(cfg_.count * elem_);
  std::vector<uint8_t> out(static_cast<size_t>(outputBytes()));
  auto in = [&](int rank, int s) {
    return reinterpret_cast<const char*>(ranks_[static_cast<size_t>(rank)]->input.data()) +
           static_cast<size_t>(s) * seg;
  };
  auto reduceSeg = [&](int s, void* dst) {
    std::vector<const void*> srcs;
    for (int k = 0; k < n; ++k) srcs.push_back(in(k, s));
    EXPECT_EQ(reduceAllHost(cfg_.op, cfg_.dtype, srcs.data(), n, dst, cfg_.count), tsrSuccess);
  };
  switch (cfg_.collective) {
    case Collective::kAllReduce:
    case Collective::kReduce: reduceSeg(0, out.data()); break;
    case Collective::kReduceScatter: reduceSeg(r, out.data()); break;
    case Collective::kAllGather:
      for (int s = 0; s < n; ++s)
        std::memcpy(out.data() + static_cast<size_t>(s) * seg, in(s, 0), seg);
      break;
    case Collective::kBroadcast: std::memcpy(out.data(), in(cfg_.root, 0), seg); break;
    case Collective::kAllToAll:
      for (int s = 0; s < n; ++s)
        std::memcpy(out.data() + static_cast<size_t>(s) * seg, in(s, r), seg);
      break;
  }
  return out;
}

}  // namespace tessera::test
