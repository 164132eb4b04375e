// The device choice on a machine (tessera_sim's default, simulator.hpp), simulated.
#include <string>
#include <vector>

#include "collectives/exec/engine.hpp"
#include "collectives/exec/planner.hpp"
#include "collectives/sim/simulator.hpp"

namespace tessera::sim {
namespace {
bool sameKey(const PlanKey& a, const PlanKey& b) { return !(a < b) && !(b < a); }

}  // namespace

Result deviceChoices(const SimSpec& spec, bool registered, std::vector<DeviceChoice>* out) {
  const Machine& m = spec.machine;
  Tuner tuner;
  TuneInput in;
  in.collective = spec.collective;
  in.nranks = m.nranks();
  in.root = collectiveHasRoot(spec.collective) ? spec.root : 0;
  for (int r = 0; r < in.nranks; ++r) in.hostOf.push_back(m.nodeOf(r));
  in.intraHost = TransportKind::kCudaIpc;
  in.interHost = TransportKind::kUcx;
  in.deviceExecutor = true;
  in.scratchBytes = spec.scratchBytes;
  in.workers = kDeviceCtas;
  in.nicsPerHost = m.nicsPerNode;
  in.zeroCopyPossible = registered;  // windows: the tuner may pick a zero-copy form
  const Staging staging = registered ? Staging::kZeroCopy : Staging::kScratch;
  out->clear();
  for (uint64_t bytes : spec.sizes) {
    in.bytes = bytes;
    TuneChoice choice;
    TSR_CHECK(tuner.choose(in, &choice));
    DeviceChoice c;
    c.key = planKeyOf(ExecKind::kDevice, spec.collective, in.root, staging, choice, kDeviceCtas);
    c.ll = choice.protocol == Protocol::kLL;
    c.predictedUs = choice.predictedUs;
    out->push_back(std::move(c));
  }
  return tsrSuccess;
}

Result simulateDeviceChoice(const SimSpec& spec, bool registered, SimReport* rep,
                            std::vector<std::string>* plans) {
  std::vector<DeviceChoice> picks;
  TSR_CHECK(deviceChoices(spec, registered, &picks));
  *rep = SimReport{};
  plans->clear();
  std::vector<std::string> names;
  for (size_t i = 0; i < spec.sizes.size();) {
    const DeviceChoice& first = picks[i];
    std::vector<bool> ll{first.ll};
    size_t j = i + 1;
    for (; j < spec.sizes.size() && sameKey(picks[j].key, first.key); ++j)
      ll.push_back(picks[j].ll);
    SimSpec part = spec;
    part.algorithm = first.key.algorithm;
    part.pipeline = first.key.pipeline;
    part.workers = first.key.workers;
    part.zeroCopy = first.key.zeroCopy;
    part.sizes.assign(spec.sizes.begin() + static_cast<std::ptrdiff_t>(i),
                      spec.sizes.begin() + static_cast<std::ptrdiff_t>(j));
    SimReport r;
    TSR_CHECK(simulateForked(part, &r));  // SimGrid: one simulation per process
    for (size_t k = 0; k < r.rows.size(); ++k) {
      rep->rows.push_back(r.rows[k]);
      plans->push_back(k < ll.size() && ll[k] ? r.plan + " (tuner: LL, not simulated)" : r.plan);
    }
    if (names.empty() || names.back() != r.plan) names.push_back(r.plan);
    rep->events += r.events;
    rep->wallSeconds += r.wallSeconds;
    rep->simSeconds += r.simSeconds;
    i = j;
  }
  rep->plan = registered ? "the device choice on windows" : "the device choice";
  for (size_t k = 0; k < names.size(); ++k) rep->plan += (k == 0 ? " (" : ", ") + names[k];
  if (!names.empty()) rep->plan += ")";
  return tsrSuccess;
}

}  // namespace tessera::sim
