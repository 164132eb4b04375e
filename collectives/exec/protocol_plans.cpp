// The protocols of protocols.hpp as plans (protocol_plans.hpp).
#include "collectives/exec/protocol_plans.hpp"

#include "collectives/algorithms/builder.hpp"
#include "collectives/exec/protocols.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}  // namespace

Result sendRecvRingPlan(int slots, int pieces, int credits, Plan* out) {
  if (slots < 1 || pieces < slots || pieces % slots != 0 || credits < 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "sendRecvRingPlan: %d pieces through %d slots with %d credits (pieces must be "
                    "a positive multiple of the slots)",
                    pieces, slots, credits);
  GenParams g;
  g.collective = Collective::kBroadcast;
  g.algorithm = "p2p-ring";
  g.nranks = 2;
  g.root = 0;
  PlanBuilder b(g, pieces, 1);
  b.useScratch(1, 1);  // slots 0..slots-1 of its one segment are the ring
  b.credit(0, 1, 0, credits);
  OpWriter sender = b.ops(0), receiver = b.ops(1);
  for (int k = 0; k < pieces; ++k) {
    const int slot = static_cast<int>(proto::ringSlot(static_cast<uint64_t>(k), slots));
    sender.wait(1, 0).put(onRank(1, scratchRef(slot)), inRef(k)).signal(1, 0);
    receiver.wait(0, 0).copy(outRef(k), scratchRef(slot)).signal(0, 0);
  }
  // Last: in place the root's output is its input, which the puts read.
  sender.copy(outRef(0, pieces), inRef(0, pieces));
  b.finish(out);
  return tsrSuccess;
}

Result exchangeRoundsPlan(int nranks, int rounds, int parities, Plan* out) {
  if (nranks < 2 || parities < 1 || rounds < parities || rounds % parities != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "exchangeRoundsPlan: %d rounds, %d parities, %d ranks (rounds must be a "
                    "positive multiple of the parities, ranks at least 2)",
                    rounds, parities, nranks);
  GenParams g;
  g.collective = Collective::kAllGather;
  g.algorithm = "exchange";
  g.nranks = nranks;
  PlanBuilder b(g, rounds, 1);
  const int cps = rounds;  // scratch: one segment per writer, its first `parities` slots used
  for (int r = 0; r < nranks; ++r) {
    b.useScratch(r, nranks);
    OpWriter w = b.ops(r);
    for (int h = 0; h < rounds; ++h) {
      const int parity = h % parities;
      for (int p = 0; p < nranks; ++p)
        if (p != r) w.put(onRank(p, scratchRef(r * cps + parity)), inRef(h)).signal(p, 0);
      // After the puts: in place the rank's own output chunk is the input chunk they read.
      w.copy(outRef(r * cps + h), inRef(h));
      for (int p = 0; p < nranks; ++p)
        if (p != r) w.wait(p, 0).copy(outRef(p * cps + h), scratchRef(p * cps + parity));
    }
  }
  b.finish(out);
  return tsrSuccess;
}

}  // namespace tessera
