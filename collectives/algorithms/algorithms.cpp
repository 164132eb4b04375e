// The registry of algorithm families (algorithms.hpp) and generatePlan: argument checks shared by
// every family, then dispatch to the family's file.
#include "collectives/algorithms/algorithms.hpp"

#include <string>
#include <utility>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr Collective kAR = Collective::kAllReduce;
constexpr Collective kRS = Collective::kReduceScatter;
constexpr Collective kAG = Collective::kAllGather;
constexpr Collective kBC = Collective::kBroadcast;
constexpr Collective kRD = Collective::kReduce;
constexpr Collective kA2A = Collective::kAllToAll;

using Generator = Result (*)(const GenParams&, Plan*);

struct Family {
  AlgorithmInfo info;
  Generator generate;
};

// Every family offers zero-copy: where one has no zero-copy variant for a collective, it makes
// its scratch plan instead (generatePlan treats zeroCopy as a permission).
AlgorithmInfo makeInfo(const char* name, std::vector<Collective> collectives, bool canonical,
                       bool needsHosts, const char* summary) {
  return AlgorithmInfo{.name = name,
                       .collectives = std::move(collectives),
                       .canonicalOrder = canonical,
                       .needsHosts = needsHosts,
                       .summary = summary};
}

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {makeInfo(
           "ring", {kAR, kRS, kAG, kBC, kRD}, false, false,
           "ring: reduce-scatter + all-gather around the ring; chains for broadcast and reduce"),
       generateRing},
      {makeInfo("tree", {kAR}, false, false,
                "double binary tree: reduce up, broadcast down, half the data on each tree"),
       generateTree},
      {makeInfo("rhd", {kAR, kRS, kAG}, false, false,
                "recursive halving/doubling; extra ranks folded into partners"),
       generateRhd},
      {makeInfo("oneshot", {kAR, kAG, kBC, kRD}, true, false,
                "all-pairs one-shot: every rank gathers every input and reduces in rank order"),
       generateOneShot},
      {makeInfo("twoshot", {kAR, kRS}, true, false,
                "all-pairs two-shot: direct reduce-scatter in rank order, then direct all-gather"),
       generateTwoShot},
      {makeInfo("pairwise", {kA2A}, false, false,
                "pairwise all-to-all: n-1 steps, step s sends to rank+s, receives from rank-s"),
       generatePairwise},
      {makeInfo("hier", {kAR, kRS, kAG, kBC, kRD}, false, true,
                "hierarchical: within each host, across hosts, within the host again"),
       generateHier},
  };
  return kFamilies;
}

const Family* findFamily(const std::string& name) {
  for (const Family& f : families()) {
    if (name == f.info.name) return &f;
  }
  return nullptr;
}

std::string familyNames() {
  std::string names;
  for (const Family& f : families()) {
    if (!names.empty()) names += ", ";
    names += f.info.name;
  }
  return names;
}

std::string collectiveNames(const std::vector<Collective>& cs) {
  std::string names;
  for (Collective c : cs) {
    if (!names.empty()) names += ", ";
    names += collectiveName(c);
  }
  return names;
}

}  // namespace

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> kInfos = [] {
    std::vector<AlgorithmInfo> infos;
    for (const Family& f : families()) infos.push_back(f.info);
    return infos;
  }();
  return kInfos;
}

const AlgorithmInfo* findAlgorithm(const std::string& name) {
  const Family* f = findFamily(name);
  return f == nullptr ? nullptr : &f->info;
}

bool algorithmSupports(const std::string& algorithm, Collective c) {
  const AlgorithmInfo* info = findAlgorithm(algorithm);
  if (info == nullptr) return false;
  for (Collective supported : info->collectives) {
    if (supported == c) return true;
  }
  return false;
}

Result generatePlan(const GenParams& params, Plan* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "generatePlan: out is null");
  const Family* family = findFamily(params.algorithm);
  if (family == nullptr) {
    return TSR_FAIL(tsrInvalidArgument, "unknown algorithm family \"%s\" (known: %s)",
                    params.algorithm.c_str(), familyNames().c_str());
  }
  const char* name = family->info.name;
  const char* coll = collectiveName(params.collective);
  if (!algorithmSupports(params.algorithm, params.collective)) {
    return TSR_FAIL(tsrInvalidArgument,
                    "algorithm family %s does not generate %s (it generates %s)", name, coll,
                    collectiveNames(family->info.collectives).c_str());
  }
  if (params.nranks < 1 || params.nranks > kMaxPlanRanks) {
    return TSR_FAIL(tsrInvalidArgument, "%s %s: nranks %d is outside 1..%d", name, coll,
                    params.nranks, kMaxPlanRanks);
  }
  if (params.root < 0 || params.root >= params.nranks) {
    return TSR_FAIL(tsrInvalidArgument, "%s %s: root %d is outside 0..%d", name, coll, params.root,
                    params.nranks - 1);
  }
  if (params.pipeline < 0 || params.pipeline > kMaxChunksPerSegment) {
    return TSR_FAIL(tsrInvalidArgument, "%s %s: pipeline %d is outside 0..%d", name, coll,
                    params.pipeline, kMaxChunksPerSegment);
  }
  if (params.workers < 1 || params.workers > kMaxWorkers) {
    return TSR_FAIL(tsrInvalidArgument, "%s %s: workers %d is outside 1..%d", name, coll,
                    params.workers, kMaxWorkers);
  }
  if (!params.hostOf.empty()) {
    if (static_cast<int>(params.hostOf.size()) != params.nranks) {
      return TSR_FAIL(tsrInvalidArgument, "%s %s: hostOf has %zu entries for %d ranks", name, coll,
                      params.hostOf.size(), params.nranks);
    }
    for (size_t r = 0; r < params.hostOf.size(); ++r) {
      if (params.hostOf[r] < 0 || params.hostOf[r] >= params.nranks) {
        return TSR_FAIL(tsrInvalidArgument, "%s %s: hostOf[%zu] = %d is outside 0..%d", name, coll,
                        r, params.hostOf[r], params.nranks - 1);
      }
    }
  }
  // zeroCopy is a permission: without a zero-copy variant a family makes its scratch plan
  // (Plan::zeroCopy says which one came out).
  Plan plan;
  TSR_CHECK(family->generate(params, &plan));
  *out = std::move(plan);
  return tsrSuccess;
}

}  // namespace tessera
