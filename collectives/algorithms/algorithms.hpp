// Algorithm generators (DESIGN.md, "Algorithms"): each family, one file, emits Plans. Every
// generated plan passes the verifier for every rank count 1..16 (tests/unit/collectives).
//
// Families and what they generate:
//   ring       allreduce (reduce-scatter + all-gather ring), reducescatter, allgather,
//              broadcast (pipelined chain from the root), reduce (chain towards the root)
//   tree       allreduce: double binary tree (two complementary trees, half the data each;
//              reduce up, broadcast down, pipelined over chunks)
//   rhd        recursive halving/doubling: allreduce, reducescatter, allgather; rank counts
//              that are not powers of two fold the extra ranks into their partners first
//   oneshot    all-pairs one-shot allreduce: every rank gathers every input, reduces locally
//              (small messages; canonical order)
//   twoshot    all-pairs two-shot allreduce: reduce-scatter by direct exchange, then all-gather
//              (canonical order)
//   pairwise   alltoall: n-1 steps, step s exchanges with rank +- s
//   hier       hierarchical allreduce / reducescatter / allgather / broadcast / reduce: within
//              each host, then across hosts (one leader per host, or per local rank), then
//              within the host again; needs GenParams::hostOf
// Zero-copy variants (GenParams::zeroCopy) put straight into peers' output buffers and read
// peers' inputs where that saves a copy; the others touch peers only through scratch.
#pragma once

#include <string>
#include <vector>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"

namespace tessera {

struct GenParams {
  Collective collective = Collective::kAllReduce;
  std::string algorithm;  // a family name above
  int nranks = 1;
  int root = 0;
  // Chunks per segment: the pipelining depth (>= 1; a family may raise it to what it needs,
  // e.g. ring allreduce uses nranks * pipeline). 0: the family's default.
  int pipeline = 0;
  // Workers per rank the plan may use (>= 1); families that have independent streams of work
  // (the two trees, the two ring directions) spread them over workers.
  int workers = 1;
  bool zeroCopy = false;
  // Host of each rank (size nranks, small integers); empty: all on one host. Only hier uses it.
  std::vector<int> hostOf;
};

struct AlgorithmInfo {
  const char* name;
  std::vector<Collective> collectives;
  bool canonicalOrder;  // its reducing plans have Plan::canonicalOrder
  bool needsHosts;      // hier
  const char* summary;
};

// Every family, in a fixed order.
const std::vector<AlgorithmInfo>& algorithms();
// nullptr when unknown.
const AlgorithmInfo* findAlgorithm(const std::string& name);
// Whether `algorithm` generates `c`.
bool algorithmSupports(const std::string& algorithm, Collective c);

// Generates the plan. tsrInvalidArgument (naming the family and the collective) when the family
// does not generate that collective, nranks is outside 1..kMaxPlanRanks, root is out of range,
// or hostOf has the wrong size. The plan is NOT verified here (the plan cache verifies).
Result generatePlan(const GenParams& params, Plan* out);

// ---- Family entry points (one file each; generatePlan dispatches) -------------------------------
Result generateRing(const GenParams& params, Plan* out);
Result generateTree(const GenParams& params, Plan* out);
Result generateRhd(const GenParams& params, Plan* out);
Result generateOneShot(const GenParams& params, Plan* out);
Result generateTwoShot(const GenParams& params, Plan* out);
Result generatePairwise(const GenParams& params, Plan* out);
Result generateHier(const GenParams& params, Plan* out);

}  // namespace tessera
