// What the cost model is fed: default link parameters, the host layout of a call, and which
// families and zero-copy forms it knows.
#include <algorithm>
#include <array>
#include <cstring>

#include "collectives/tuner/cost_model.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTuning;
}  // namespace

// Placeholders until transport_perf has measured the CI machine class (2 cores, host memory):
// a step's latency is one signal round through the semaphore, bandwidth one stream's memcpy-like
// rate. inproc and shm move bytes through host memory; ucx here runs over TCP. cuda_ipc and p2p
// are the device executor's links within a node, set to an H100 SXM5's NVLink4 as tessera_sim's
// dgx-h100 preset models it (450 GB/s per direction at the efficiency calibrated on NCCL's ring,
// 0.8386: 377 GB/s; a step is a put over two NVLink hops and a signal back, 0.5 us per hop:
// 2 us); none of them measured by tessera on a GPU yet, and a PCIe machine (tens of GB/s) needs
// its own numbers. A TESSERA_TUNER_FILE replaces them with numbers for the machine at hand (no
// measurement at init yet).
TunerParams defaultTunerParams() {
  TunerParams p;
  p.links[static_cast<size_t>(TransportKind::kInproc)] = LinkModel{0.3, 8.0};
  p.links[static_cast<size_t>(TransportKind::kShm)] = LinkModel{0.5, 6.0};
  p.links[static_cast<size_t>(TransportKind::kUcx)] = LinkModel{25.0, 1.0};
  p.links[static_cast<size_t>(TransportKind::kCudaIpc)] = LinkModel{2.0, 377.0};
  p.links[static_cast<size_t>(TransportKind::kP2p)] = LinkModel{2.0, 377.0};
  p.gammaGBs = 4.0;
  p.callOverheadUs = 0.3;
  return p;
}

CostFamily costFamilyOf(const char* name) {
  static constexpr std::array<const char*, 7> kNames = {"ring",    "tree",     "rhd", "oneshot",
                                                        "twoshot", "pairwise", "hier"};
  for (size_t i = 0; i < kNames.size(); ++i)
    if (std::strcmp(kNames[i], name) == 0) return static_cast<CostFamily>(i);
  return CostFamily::kUnknown;
}

bool hasZeroCopyForm(CostFamily family, Collective c) {
  switch (family) {
    case CostFamily::kRing: return c != Collective::kReduceScatter && c != Collective::kReduce;
    case CostFamily::kRhd: return c != Collective::kReduceScatter;
    case CostFamily::kHier: return c != Collective::kReduce;
    case CostFamily::kTree:
    case CostFamily::kOneShot:
    case CostFamily::kTwoShot:
    case CostFamily::kPairwise: return true;
    case CostFamily::kUnknown: return false;
  }
  return false;
}

Result describeHosts(const TuneInput& in, HostLayout* out) {
  if (in.nranks < 1 || in.nranks > kMaxPlanRanks)
    return TSR_FAIL(tsrInvalidArgument, "tuner: %d ranks is outside 1..%d", in.nranks,
                    kMaxPlanRanks);
  if (!in.hostOf.empty() && in.hostOf.size() != static_cast<size_t>(in.nranks))
    return TSR_FAIL(tsrInvalidArgument, "tuner: hostOf has %zu entries for %d ranks",
                    in.hostOf.size(), in.nranks);
  if (collectiveHasRoot(in.collective) && (in.root < 0 || in.root >= in.nranks))
    return TSR_FAIL(tsrInvalidArgument, "tuner: root %d of %s is outside 0..%d", in.root,
                    collectiveName(in.collective), in.nranks - 1);
  HostLayout hl;
  hl.nranks = in.nranks;
  hl.hostOf = in.hostOf;
  // Host indices are small: count ranks per host in a stack array (no allocation per call).
  std::array<uint16_t, kMaxPlanRanks> perHost{};
  int hosts = 0, maxLocal = 0;
  for (size_t r = 0; r < in.hostOf.size(); ++r) {
    int h = in.hostOf[r];
    if (h < 0 || h >= kMaxPlanRanks)
      return TSR_FAIL(tsrInvalidArgument, "tuner: hostOf[%zu] = %d is outside 0..%d", r, h,
                      kMaxPlanRanks - 1);
    uint16_t& count = perHost[static_cast<size_t>(h)];
    if (count++ == 0) ++hosts;
    maxLocal = std::max(maxLocal, static_cast<int>(count));
  }
  hl.hosts = std::max(hosts, 1);
  hl.maxLocal = in.hostOf.empty() ? in.nranks : maxLocal;
  *out = hl;
  return tsrSuccess;
}

}  // namespace tessera
