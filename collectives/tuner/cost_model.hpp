// The tuner's alpha-beta cost model (internal to collectives/tuner): closed-form times per family
// and collective. tuner.cpp chooses among families with it; tests read it through
// Tuner::predictUs. Formulas are documented next to each family in cost_model.cpp.
#pragma once

#include <span>

#include "collectives/tuner/tuner.hpp"
#include "core/status.hpp"

namespace tessera {

// The families the model knows. A family of algorithms() that is not listed here (one added
// later) is not modelled: the tuner skips it rather than guessing its cost.
enum class CostFamily : int { kRing, kTree, kRhd, kOneShot, kTwoShot, kPairwise, kHier, kUnknown };
CostFamily costFamilyOf(const char* name);

// Where the ranks of a call live, summarised once per choice.
struct HostLayout {
  int nranks = 1;
  int hosts = 1;
  int maxLocal = 1;             // the most ranks on one host
  std::span<const int> hostOf;  // empty: every rank on one host
  bool crosses(int a, int b) const {
    return !hostOf.empty() && hostOf[static_cast<size_t>(a)] != hostOf[static_cast<size_t>(b)];
  }
};
// tsrInvalidArgument when nranks is outside 1..kMaxPlanRanks, or hostOf is neither empty nor of
// size nranks, or holds a host index outside 0..kMaxPlanRanks-1, or the root of a rooted
// collective is not a rank. Allocates nothing.
Result describeHosts(const TuneInput& in, HostLayout* out);

// The pipeline depths the tuner considers (chunks per rank per segment).
inline constexpr int kPipelineChoices[] = {1, 2, 4, 8, 16};
// A chunk much smaller than this reaches the link's full bandwidth only in theory: each piece
// beyond the first of a step pays this many bytes' worth of link time (Hockney's n-half), which
// keeps the model's preferred chunk in the 64 KiB - 1 MiB range.
inline constexpr double kHalfBandwidthBytes = 64.0 * 1024;

// Whether the family's zero-copy variant of `c` saves a staging pass (the model charges that
// pass only to staged plans). GenParams::zeroCopy is a permission: a family without a variant
// for a collective makes its scratch plan (ring reducescatter and reduce, rhd
// reducescatter and hier reduce keep partial sums in scratch).
bool hasZeroCopyForm(CostFamily family, Collective c);

// Predicted microseconds of one call of `family` with `pipeline` chunks per segment; zeroCopy
// says whether the zero-copy variant runs. sliceBytes: the bytes of a segment one iteration of
// the staged plan carries (0: one iteration); a staged call of more runs as that many calls of a
// slice each. Negative when the family does not generate in.collective, or needs several hosts
// and has one.
double familyCostUs(const TunerParams& params, const TuneInput& in, const HostLayout& layout,
                    CostFamily family, int pipeline, bool zeroCopy, double sliceBytes = 0);

// The LL protocol's bytes per (sender, receiver) pair for `in` (exec::llSupports' payload): the
// whole buffer for allreduce, broadcast and reduce, one block (bytes / n) for the others.
size_t llPayloadBytes(const TuneInput& in);

// Predicted microseconds of the call with the LL protocol (documented in cost_model.cpp);
// negative when LL does not apply (not the device executor, llSupports refuses, several hosts,
// an intra-host transport that does not map).
double llCostUs(const TunerParams& params, const TuneInput& in, const HostLayout& layout);

}  // namespace tessera
