// The workload simulator's engine (engine.hpp).
#include "workload/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "collectives/exec/engine.hpp"
#include "collectives/sim/simulator.hpp"
#include "core/log.hpp"
#include "fused/sim/fused_model.hpp"

namespace tessera::workload {
static_assert(kDeviceCtasForWorkload == kDeviceCtas, "the device executor's grid changed");
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

enum class State : uint8_t { kWaiting, kReady, kRunning, kDone };

// One running thing: a compute op, a delay, or a collective / send-recv / fused call with all its
// members' ops.
struct Activity {
  double remaining = 0;  // microseconds at rate 1
  double rate = 1;
  std::vector<std::pair<int32_t, uint32_t>> ops;  // (rank, op)
  std::vector<int32_t> computeRanks;              // ranks whose GPU it computes on
  std::vector<int32_t> commRanks;                 // ranks it communicates on (interference)
  std::vector<int32_t> nics;                      // NICs it crosses
  const Op* computeOp = nullptr;  // a compute op: its time beside a collective, when one runs
  double alone = 0;               // the compute op's time alone
  double commMemGBs = 0;          // a collective: memory bandwidth its copies use
};

struct Engine {
  const Workload& w;
  const GpuModel& gpu;
  const sim::Machine& machine;
  const EngineOptions& opt;
  StepReport* rep;

  // Per rank and op.
  std::vector<std::vector<State>> state;
  std::vector<std::vector<uint32_t>> pending;              // deps not yet done
  std::vector<std::vector<uint32_t>> succStart, succList;  // CSR successors per rank
  std::vector<std::vector<uint32_t>> matchIndex;           // k-th op on its group / peer
  std::vector<size_t> opsLeft;
  // Matching.
  std::vector<std::vector<int>> groupReady;  // [group][k] members ready
  std::vector<std::vector<std::vector<std::pair<int32_t, uint32_t>>>> groupOps;  // [group][k]
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> p2p;  // (src,dst,k) -> send, recv op
  // Resources.
  std::vector<int> computeCount, commCount;
  std::vector<double> commMem;
  std::vector<int> nicCount;
  int nicsTotal = 0;
  std::vector<Activity> acts;
  std::vector<size_t> freeActs;
  std::vector<size_t> running;
  // Caches.
  std::map<std::tuple<int, int, int, double>, size_t> collCache;  // -> rep->collectives index
  std::map<std::tuple<int, int, uint64_t, uint64_t, uint64_t>, double> fusedCache;
  double now = 0;

  Engine(const Workload& w_, const GpuModel& g, const sim::Machine& m, const EngineOptions& o,
         StepReport* r)
      : w(w_), gpu(g), machine(m), opt(o), rep(r) {}

  int nodeOfRank(int r) const { return w.ranks[static_cast<size_t>(r)].gpu / machine.ranksPerNode; }
  int nicOfRank(int r) const {
    int g = w.ranks[static_cast<size_t>(r)].gpu;
    return (g / machine.ranksPerNode) * machine.nicsPerNode +
           (g % machine.ranksPerNode) * machine.nicsPerNode / machine.ranksPerNode;
  }

  Result init() {
    const size_t n = w.ranks.size();
    state.resize(n);
    pending.resize(n);
    succStart.resize(n);
    succList.resize(n);
    matchIndex.resize(n);
    opsLeft.resize(n);
    groupReady.resize(w.groups.size());
    groupOps.resize(w.groups.size());
    computeCount.assign(n, 0);
    commCount.assign(n, 0);
    commMem.assign(n, 0);
    int maxGpu = 0;
    for (const Rank& r : w.ranks) maxGpu = std::max(maxGpu, r.gpu);
    if (maxGpu >= machine.nranks())
      return TSR_FAIL(tsrInvalidArgument,
                      "the workload places a rank on GPU %d, but %s with %d nodes has %d GPUs",
                      maxGpu, machine.name.c_str(), machine.nodes, machine.nranks());
    nicsTotal = machine.nodes * machine.nicsPerNode;
    nicCount.assign(static_cast<size_t>(nicsTotal), 0);
    rep->ranks.assign(n, RankStats{});
    if (opt.keepTimeline) rep->timeline.resize(n);
    for (size_t r = 0; r < n; ++r) {
      const Rank& rk = w.ranks[r];
      const size_t nops = rk.ops.size();
      state[r].assign(nops, State::kWaiting);
      pending[r].assign(nops, 0);
      matchIndex[r].assign(nops, 0);
      opsLeft[r] = nops;
      if (opt.keepTimeline) rep->timeline[r].assign(nops, OpSpan{});
      std::vector<std::vector<uint32_t>> succ(nops);
      std::vector<int64_t> last(rk.streams.size(), -1);
      std::vector<uint32_t> groupK(w.groups.size(), 0);
      std::unordered_map<int64_t, uint32_t> sendK, recvK;
      for (size_t i = 0; i < nops; ++i) {
        const Op& op = rk.ops[i];
        if (last[op.stream] >= 0) {
          succ[static_cast<size_t>(last[op.stream])].push_back(static_cast<uint32_t>(i));
          ++pending[r][i];
        }
        last[op.stream] = static_cast<int64_t>(i);
        for (uint32_t a : op.after) {
          succ[a].push_back(static_cast<uint32_t>(i));
          ++pending[r][i];
        }
        if (op.kind == OpKind::kCollective || op.kind == OpKind::kFused) {
          matchIndex[r][i] = groupK[static_cast<size_t>(op.group)]++;
        } else if (op.kind == OpKind::kSend) {
          matchIndex[r][i] = sendK[op.peer]++;
        } else if (op.kind == OpKind::kRecv) {
          matchIndex[r][i] = recvK[op.peer]++;
        }
      }
      succStart[r].assign(nops + 1, 0);
      for (size_t i = 0; i < nops; ++i)
        succStart[r][i + 1] = succStart[r][i] + static_cast<uint32_t>(succ[i].size());
      succList[r].reserve(succStart[r][nops]);
      for (size_t i = 0; i < nops; ++i)
        succList[r].insert(succList[r].end(), succ[i].begin(), succ[i].end());
    }
    return tsrSuccess;
  }

  size_t newActivity() {
    if (!freeActs.empty()) {
      size_t a = freeActs.back();
      freeActs.pop_back();
      acts[a] = Activity{};
      return a;
    }
    acts.emplace_back();
    return acts.size() - 1;
  }

  // ---- Costs ----

  Result collectiveUs(const Op& op, double* us, double* memGBs) {
    const Group& g = w.groups[static_cast<size_t>(op.group)];
    *memGBs = 0;
    if (opt.fixedCollectiveUs >= 0) {
      *us = opt.fixedCollectiveUs;
      return tsrSuccess;
    }
    if (g.size <= 1 || op.bytes <= 0) {
      *us = 0;
      return tsrSuccess;
    }
    double bytes = op.bytes, scale = 1;
    if (bytes > static_cast<double>(opt.maxSimulatedBytes)) {
      scale = bytes / static_cast<double>(opt.maxSimulatedBytes);
      bytes = static_cast<double>(opt.maxSimulatedBytes);
    }
    auto key = std::make_tuple(static_cast<int>(op.collective), g.size, g.nodes, bytes);
    auto it = collCache.find(key);
    if (it == collCache.end()) {
      if (g.size % g.nodes != 0)
        return TSR_FAIL(tsrInvalidArgument,
                        "group \"%s\": %d ranks over %d nodes is not the same number per node",
                        g.name.c_str(), g.size, g.nodes);
      sim::Machine m = machine;
      m.nodes = g.nodes;
      m.ranksPerNode = g.size / g.nodes;
      m.nicsPerNode =
          std::max(1, m.ranksPerNode * machine.nicsPerNode / std::max(1, machine.ranksPerNode));
      sim::SimSpec spec;
      spec.machine = m;
      spec.collective = op.collective;
      spec.sizes = {static_cast<uint64_t>(bytes)};
      spec.elemSize = 2;  // bf16 activations and gradients
      spec.scratchBytes = kDeviceScratchBytes;
      spec.verify = false;  // the device choice's plans are verified by the test suite
      sim::SimReport r;
      std::vector<std::string> plans;
      double t0 = nowSeconds();
      if (opt.plan && opt.plan->collective == op.collective && opt.plan->nranks == g.size) {
        spec.plan = opt.plan;
        spec.verify = true;  // a researcher's plan: verified first, as tessera_sim --plan does
        TSR_CHECK(sim::simulateForked(spec, &r));
      } else if (!opt.algorithm.empty()) {
        spec.algorithm = opt.algorithm;
        spec.workers = opt.workers;
        spec.zeroCopy = opt.zeroCopy;
        TSR_CHECK(sim::simulateForked(spec, &r));
      } else {
        TSR_CHECK(sim::simulateDeviceChoice(spec, opt.registered, &r, &plans));
      }
      rep->collectiveSeconds += nowSeconds() - t0;
      CollectiveCost c;
      char what[160];
      std::snprintf(what, sizeof what, "%s of %d ranks on %d node%s, %.0f B",
                    collectiveName(op.collective), g.size, g.nodes, g.nodes == 1 ? "" : "s", bytes);
      c.what = what;
      c.plan = plans.empty() ? r.plan : plans[0];
      c.us = r.rows.empty() ? 0 : r.rows[0].us;
      rep->collectives.push_back(c);
      it = collCache.emplace(key, rep->collectives.size() - 1).first;
    }
    CollectiveCost& c = rep->collectives[it->second];
    ++c.calls;
    *us = c.us * scale;
    // Copies and reductions read and write about three times the bytes on the wire.
    if (*us > 0) *memGBs = 3.0 * op.bytes / (*us * 1e3);
    return tsrSuccess;
  }

  double p2pUs(int from, int to, double bytes) const {
    if (nodeOfRank(from) == nodeOfRank(to))
      return 2 * machine.intraLatencyUs +
             bytes / (machine.intraGBs * machine.intraEfficiency * 1e3);
    return 2 * machine.nicLatencyUs + machine.fabricLatencyUs + bytes / (machine.nicGBs * 1e3);
  }

  Result fusedUs(const Op& op, double* us) {
    const Group& g = w.groups[static_cast<size_t>(op.group)];
    auto key = std::make_tuple(static_cast<int>(op.fused), g.size, op.gemm.m, op.gemm.n, op.gemm.k);
    auto it = fusedCache.find(key);
    if (it != fusedCache.end()) {
      *us = it->second;
      return tsrSuccess;
    }
    fused::FusedModelInput in;
    in.op = op.fused == FusedKind::kGemmReduceScatter ? fused::FusedOp::kGemmReduceScatter
            : op.fused == FusedKind::kAllGatherGemm   ? fused::FusedOp::kAllGatherGemm
                                                      : fused::FusedOp::kGemmAllReduce;
    in.nranks = static_cast<uint32_t>(g.size);
    in.m = op.gemm.m;
    in.n = op.gemm.n;
    in.k = op.gemm.k;
    in.elemBytes = static_cast<uint32_t>(dtypeBytes(op.gemm.dtype));
    in.tiles.tileM = static_cast<uint32_t>(gpu.tileM);
    in.tiles.tileN = static_cast<uint32_t>(gpu.tileN);
    in.sms = static_cast<uint32_t>(gpu.sms);
    const double perSm = gpu.peakTflops(op.gemm.dtype) * 1e6 * gpu.gemmEfficiency / gpu.sms;
    // A tile's main loop and its wave's loads and epilogue (compute.hpp).
    in.tileUs =
        2.0 * gpu.tileM * gpu.tileN * static_cast<double>(op.gemm.k) / perSm + gpu.gemmWaveUs;
    in.linkBytesPerUs = machine.intraGBs * machine.intraEfficiency * 1e3;
    in.linkLatencyUs = 2 * machine.intraLatencyUs;
    in.memBytesPerUs = gpu.memGBs * gpu.memEfficiency * 1e3;
    fused::FusedModelResult res;
    if (!fused::simulateFused(in, &res))
      return TSR_FAIL(tsrInvalidArgument, "fused %s: m %llu is not a multiple of %d ranks",
                      fusedKindName(op.fused), static_cast<unsigned long long>(op.gemm.m), g.size);
    // One kernel: the GEMM's fixed cost once, as a GEMM's (compute.hpp).
    *us = res.us * static_cast<double>(op.gemm.batch) + gpu.gemmFixedUs + gpu.launchUs;
    fusedCache.emplace(key, *us);
    return tsrSuccess;
  }

  double computeUs(const Op& op, const Interference& with) const {
    switch (op.kind) {
      case OpKind::kGemm: return gemmUs(gpu, op.gemm, with);
      case OpKind::kMemory: return memoryUs(gpu, op.bytes, with);
      case OpKind::kAttention: return attentionUs(gpu, op.flops, op.bytes, op.gemm.dtype, with);
      default: return 0;
    }
  }

  // ---- Starting ops ----

  void markRunning(int32_t r, uint32_t i) {
    state[static_cast<size_t>(r)][i] = State::kRunning;
    if (opt.keepTimeline) rep->timeline[static_cast<size_t>(r)][i].start = now;
  }

  Result opReady(int32_t r, uint32_t i) {
    const Op& op = w.ranks[static_cast<size_t>(r)].ops[i];
    state[static_cast<size_t>(r)][i] = State::kReady;
    if (op.isCompute() || op.kind == OpKind::kDelay) {
      size_t a = newActivity();
      Activity& act = acts[a];
      act.ops.push_back({r, i});
      if (op.isCompute()) {
        act.remaining = computeUs(op, {});
        act.alone = act.remaining;  // the model's, for its ratio beside a collective
        ++rep->computeOps;
        if (opt.kernelTimes) {
          const double measured = opt.kernelTimes->find(op);
          if (measured > 0) {
            act.remaining = measured + gpu.launchUs;
            ++rep->measuredOps;
          }
        }
        act.computeOp = &op;
        act.computeRanks.push_back(r);
        rep->ranks[static_cast<size_t>(r)].flops +=
            op.kind == OpKind::kGemm ? gemmFlops(op.gemm) : op.flops;
      } else {
        act.remaining = op.us;
      }
      start(a);
      return tsrSuccess;
    }
    if (op.kind == OpKind::kCollective || op.kind == OpKind::kFused) {
      const size_t g = static_cast<size_t>(op.group);
      const uint32_t k = matchIndex[static_cast<size_t>(r)][i];
      if (groupReady[g].size() <= k) {
        groupReady[g].resize(k + 1, 0);
        groupOps[g].resize(k + 1);
      }
      groupOps[g][k].push_back({r, i});
      if (++groupReady[g][k] < static_cast<int>(w.groups[g].members.size())) return tsrSuccess;
      // Every member is here: one activity for all.
      size_t a = newActivity();
      double us = 0, mem = 0;
      if (op.kind == OpKind::kCollective) {
        TSR_CHECK(collectiveUs(op, &us, &mem));
      } else {
        TSR_CHECK(fusedUs(op, &us));
      }
      Activity& act = acts[a];
      act.remaining = us;
      act.commMemGBs = mem;
      act.ops = std::move(groupOps[g][k]);
      for (auto& [mr, mi] : act.ops) {
        if (op.kind == OpKind::kFused) {
          act.computeRanks.push_back(mr);
          rep->ranks[static_cast<size_t>(mr)].flops +=
              gemmFlops(w.ranks[static_cast<size_t>(mr)].ops[mi].gemm);
        } else {
          act.commRanks.push_back(mr);
          if (w.groups[g].nodes > 1 && opt.nicContention) act.nics.push_back(nicOfRank(mr));
        }
      }
      groupOps[g][k].clear();
      groupOps[g][k].shrink_to_fit();
      start(a);
      return tsrSuccess;
    }
    // send / recv
    const bool isSend = op.kind == OpKind::kSend;
    const int32_t src = isSend ? r : op.peer, dst = isSend ? op.peer : r;
    // Ranks below 2^17 (kMaxWorkloadRanks), match indices below 2^30.
    const uint64_t key = (static_cast<uint64_t>(src) << 47) | (static_cast<uint64_t>(dst) << 30) |
                         matchIndex[static_cast<size_t>(r)][i];
    auto& slot = p2p.try_emplace(key, std::make_pair(int64_t{-1}, int64_t{-1})).first->second;
    (isSend ? slot.first : slot.second) = i;
    if (slot.first < 0 || slot.second < 0) return tsrSuccess;
    const Op& sendOp = w.ranks[static_cast<size_t>(src)].ops[static_cast<size_t>(slot.first)];
    size_t a = newActivity();
    Activity& act = acts[a];
    act.remaining = p2pUs(src, dst, sendOp.bytes);
    act.ops.push_back({src, static_cast<uint32_t>(slot.first)});
    act.ops.push_back({dst, static_cast<uint32_t>(slot.second)});
    act.commRanks = {src, dst};
    if (nodeOfRank(src) != nodeOfRank(dst) && opt.nicContention)
      act.nics = {nicOfRank(src), nicOfRank(dst)};
    p2p.erase(key);
    start(a);
    return tsrSuccess;
  }

  void start(size_t a) {
    Activity& act = acts[a];
    for (auto [r, i] : act.ops) markRunning(r, i);
    for (int32_t r : act.computeRanks) ++computeCount[static_cast<size_t>(r)];
    for (int32_t r : act.commRanks) {
      ++commCount[static_cast<size_t>(r)];
      commMem[static_cast<size_t>(r)] += act.commMemGBs;
    }
    for (int32_t n : act.nics) ++nicCount[static_cast<size_t>(n)];
    running.push_back(a);
  }

  // ---- The loop ----

  void rates() {
    for (size_t a : running) {
      Activity& act = acts[a];
      double rate = 1;
      for (int32_t r : act.computeRanks) {
        double share = 1.0 / computeCount[static_cast<size_t>(r)];
        if (commCount[static_cast<size_t>(r)] > 0 && act.computeOp != nullptr && act.alone > 0)
          share *=
              act.alone /
              computeUs(*act.computeOp, Interference{opt.commSms, commMem[static_cast<size_t>(r)]});
        rate = std::min(rate, share);
      }
      for (int32_t n : act.nics) rate = std::min(rate, 1.0 / nicCount[static_cast<size_t>(n)]);
      act.rate = rate;
    }
  }

  Result finish(size_t a) {
    Activity& act = acts[a];
    for (int32_t r : act.computeRanks) --computeCount[static_cast<size_t>(r)];
    for (int32_t r : act.commRanks) {
      --commCount[static_cast<size_t>(r)];
      commMem[static_cast<size_t>(r)] -= act.commMemGBs;
    }
    for (int32_t n : act.nics) --nicCount[static_cast<size_t>(n)];
    std::vector<std::pair<int32_t, uint32_t>> ops = std::move(act.ops);
    freeActs.push_back(a);
    for (auto [r, i] : ops) {
      const size_t rs = static_cast<size_t>(r);
      state[rs][i] = State::kDone;
      --opsLeft[rs];
      if (opt.keepTimeline) rep->timeline[rs][i].end = now;
      for (uint32_t s = succStart[rs][i]; s < succStart[rs][i + 1]; ++s) {
        uint32_t j = succList[rs][s];
        if (--pending[rs][j] == 0) TSR_CHECK(opReady(r, j));
      }
    }
    return tsrSuccess;
  }

  Result deadlock() const {
    std::ostringstream s;
    int shown = 0;
    for (size_t r = 0; r < w.ranks.size() && shown < 4; ++r) {
      if (opsLeft[r] == 0) continue;
      for (size_t i = 0; i < state[r].size(); ++i) {
        if (state[r][i] == State::kDone) continue;
        const Op& op = w.ranks[r].ops[i];
        s << (shown ? "; " : "") << "rank " << r << " op \"" << op.id << "\" ";
        if (state[r][i] == State::kReady) {
          if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv)
            s << "waits for rank " << op.peer << "'s matching "
              << (op.kind == OpKind::kSend ? "recv" : "send");
          else
            s << "waits for the other members of group \""
              << w.groups[static_cast<size_t>(op.group)].name << "\"";
        } else {
          s << "waits for ops that never end";
        }
        ++shown;
        break;
      }
    }
    return TSR_FAIL(tsrInvalidArgument, "the workload deadlocks at %.1f us: %s", now,
                    s.str().c_str());
  }

  Result run() {
    TSR_CHECK(init());
    for (size_t r = 0; r < w.ranks.size(); ++r)
      for (uint32_t i = 0; i < w.ranks[r].ops.size(); ++i)
        if (pending[r][i] == 0 && state[r][i] == State::kWaiting)
          TSR_CHECK(opReady(static_cast<int32_t>(r), i));
    // Per-rank busy intervals for the exposure sums: integrated as time advances.
    while (!running.empty()) {
      rates();
      double dt = std::numeric_limits<double>::infinity();
      for (size_t a : running) dt = std::min(dt, acts[a].remaining / acts[a].rate);
      if (!(dt >= 0)) dt = 0;
      for (size_t r = 0; r < w.ranks.size(); ++r) {
        RankStats& st = rep->ranks[r];
        bool comp = computeCount[r] > 0, comm = commCount[r] > 0;
        if (comp) st.computeUs += dt;
        if (comm) st.commUs += dt;
        if (comm && !comp) st.exposedUs += dt;
      }
      now += dt;
      std::vector<size_t> ended;
      std::vector<size_t> still;
      still.reserve(running.size());
      for (size_t a : running) {
        Activity& act = acts[a];
        act.remaining -= dt * act.rate;
        if (act.remaining <= 1e-9 * std::max(1.0, now))
          ended.push_back(a);
        else
          still.push_back(a);
      }
      running.swap(still);
      for (size_t a : ended) TSR_CHECK(finish(a));
      ++rep->events;
    }
    for (size_t r = 0; r < w.ranks.size(); ++r)
      if (opsLeft[r] != 0) return deadlock();
    return tsrSuccess;
  }
};

}  // namespace

Result simulateWorkloadOn(const Workload& w, const GpuModel& gpu, const sim::Machine& machine,
                          const EngineOptions& opt, StepReport* out) {
  TSR_CHECK(checkWorkload(w, w.name.empty() ? "the workload" : w.name));
  *out = StepReport{};
  double t0 = nowSeconds();
  Engine e(w, gpu, machine, opt, out);
  TSR_CHECK(e.run());
  out->stepUs = e.now;
  const double gpus = static_cast<double>(w.totalGpus());
  double executed = 0, weights = 0, exposed = 0;
  for (size_t r = 0; r < w.ranks.size(); ++r) {
    const double wt = w.ranks[r].weight;
    executed += out->ranks[r].flops * wt;
    weights += wt;
    exposed += out->ranks[r].exposedUs * wt;
    out->exposedUs = std::max(out->exposedUs, out->ranks[r].exposedUs);
  }
  out->exposedMeanUs = weights > 0 ? exposed / weights : 0;
  out->flopsPerGpu = (w.modelFlops > 0 ? w.modelFlops : executed) / std::max(gpus, 1.0);
  out->tflopsPerGpu = out->stepUs > 0 ? out->flopsPerGpu / (out->stepUs * 1e6) : 0;
  out->percentOfPeak = 100 * out->tflopsPerGpu / gpu.bf16Tflops;
  out->wallSeconds = nowSeconds() - t0;
  return tsrSuccess;
}

Result simulateWorkload(const Workload& w, const EngineOptions& opt, StepReport* out) {
  GpuModel gpu;
  TSR_CHECK(gpuModelPreset(w.gpu, &gpu));
  // Overheads given replace the preset's; a GEMM efficiency given replaces the main-loop rate,
  // itself (a ceiling, as the preset's) or derived from the one GEMM measured at it (compute.hpp);
  // an attention efficiency given replaces the preset's. Each must be a share of the peak
  // (gemmCalibrate checks its own).
  if (opt.gemmFixedUs >= 0) gpu.gemmFixedUs = opt.gemmFixedUs;
  if (opt.gemmWaveUs >= 0) gpu.gemmWaveUs = opt.gemmWaveUs;
  if (opt.gemmEfficiency != 0 && opt.gemmEfficiencyM != 0) {
    TSR_CHECK(gemmCalibrate(
        &gpu,
        GemmShape{opt.gemmEfficiencyM, opt.gemmEfficiencyN, opt.gemmEfficiencyK, 1, DType::kBf16},
        opt.gemmEfficiency));
  } else if (opt.gemmEfficiency != 0) {
    TSR_CHECK(checkShareOfPeak(opt.gemmEfficiency, "a GEMM"));
    gpu.gemmEfficiency = opt.gemmEfficiency;
  }
  if (opt.attentionEfficiency != 0) {
    TSR_CHECK(checkShareOfPeak(opt.attentionEfficiency, "an attention"));
    gpu.attentionEfficiency = opt.attentionEfficiency;
  }
  sim::Machine m;
  TSR_CHECK(sim::platformPreset(w.platform, w.nodes, &m));
  if (m.kind != sim::MachineKind::kGpu)
    return TSR_FAIL(tsrInvalidArgument, "platform %s is not a GPU machine", w.platform.c_str());
  return simulateWorkloadOn(w, gpu, m, opt, out);
}

std::string chromeTrace(const Workload& w, const StepReport& rep) {
  std::string s = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  char buf[512];
  for (size_t r = 0; r < w.ranks.size() && r < rep.timeline.size(); ++r) {
    const Rank& rk = w.ranks[r];
    std::snprintf(buf, sizeof buf,
                  "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %zu, \"args\": "
                  "{\"name\": \"rank %zu (gpu %d)\"}}",
                  first ? "" : ",\n", r, r, rk.gpu);
    s += buf;
    first = false;
    for (size_t t = 0; t < rk.streams.size(); ++t) {
      std::snprintf(buf, sizeof buf,
                    ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %zu, \"tid\": %zu, "
                    "\"args\": {\"name\": \"%s\"}}",
                    r, t, rk.streams[t].c_str());
      s += buf;
    }
    for (size_t i = 0; i < rk.ops.size(); ++i) {
      const OpSpan& sp = rep.timeline[r][i];
      std::snprintf(buf, sizeof buf,
                    ",\n{\"ph\": \"X\", \"name\": \"%s\", \"pid\": %zu, \"tid\": %u, \"ts\": %.3f, "
                    "\"dur\": %.3f}",
                    rk.ops[i].id.c_str(), r, rk.ops[i].stream, sp.start, sp.end - sp.start);
      s += buf;
    }
  }
  s += "\n]}\n";
  return s;
}

}  // namespace tessera::workload
