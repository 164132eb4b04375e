// The shrink every kind without a native one uses. Only survivors take part: the lowest one
// prepares the child (as the leader of a split color does) and sends what it prepared to each
// other survivor; nothing waits for an excluded rank, which may be dead.
#include <algorithm>
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace tessera {
namespace {

// What the leader sends each survivor: whether it succeeded, then the kind's payload.
struct ShrinkSlot {
  int32_t ok;
  int32_t childSize;
  uint8_t payload[128];  // Bootstrap::kSplitPayloadBytes (static_assert below)
};

}  // namespace

Result Bootstrap::shrink(const std::vector<int>& excluded, std::unique_ptr<Bootstrap>* child) {
  TSR_CHECK(checkUsable("shrink"));
  if (child == nullptr) return fail(tsrInvalidArgument, "shrink with a null child pointer");
  child->reset();
  std::vector<bool> out(static_cast<size_t>(nranks()), false);
  for (int r : excluded) {
    if (r < 0 || r >= nranks())
      return fail(tsrInvalidArgument, "shrink: excluded rank %d is outside [0, %d)", r, nranks());
    if (out[static_cast<size_t>(r)])
      return fail(tsrInvalidArgument, "shrink: rank %d is excluded twice", r);
    out[static_cast<size_t>(r)] = true;
  }
  if (out[static_cast<size_t>(rank())])
    return fail(tsrInvalidArgument,
                "shrink: this rank (%d) is in the list of excluded ranks; excluded ranks do not "
                "call shrink",
                rank());
  std::vector<int> survivors;
  for (int r = 0; r < nranks(); ++r)
    if (!out[static_cast<size_t>(r)]) survivors.push_back(r);
  // No operation lock here: the shrink is made of this instance's own operations.
  return doShrink(survivors, child);
}

Result Bootstrap::shrinkArrive(const std::vector<int>& survivors) {
  // Survivors learn of a failure at different times (each at its own call's deadline at worst),
  // so the leader waits for each of them for twice the bootstrap's timeout.
  const int leader = survivors.front();
  const int32_t childSize = static_cast<int32_t>(survivors.size());
  const Deadline deadline = Deadline::after(2 * timeoutSeconds());
  if (rank() != leader) {
    Result sent = doSend(leader, kShrinkTag, &childSize, sizeof(childSize), deadline);
    if (sent != tsrSuccess)
      return addContext(sent, "shrink (telling rank %d, the lowest survivor, that this rank came)",
                        leader);
    return tsrSuccess;
  }
  for (int r : survivors) {
    if (r == leader) continue;
    int32_t theirs = 0;
    Result got = doRecv(r, kShrinkTag, &theirs, sizeof(theirs), deadline);
    if (got != tsrSuccess)
      return addContext(got, "shrink (waiting for survivor %d to call it: is it dead too?)", r);
    if (theirs != childSize)
      return fail(tsrInvalidUsage,
                  "shrink: %d survivors here but %d at rank %d: every survivor must exclude the "
                  "same ranks",
                  childSize, theirs, r);
  }
  return tsrSuccess;
}

Result Bootstrap::doShrink(const std::vector<int>& survivors, std::unique_ptr<Bootstrap>* child) {
  static_assert(sizeof(ShrinkSlot::payload) == kSplitPayloadBytes);
  const int childSize = static_cast<int>(survivors.size());
  const int leader = survivors.front();
  const int childRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), rank()) - survivors.begin());
  TSR_CHECK(shrinkArrive(survivors));
  ShrinkSlot slot;
  std::memset(&slot, 0, sizeof(slot));
  if (rank() == leader) {
    Result prepared = splitPrepare(childSize, slot.payload);
    slot.ok = prepared == tsrSuccess ? 1 : 0;
    slot.childSize = childSize;
    // Even a failed leader tells the others, so they learn it at once instead of waiting.
    for (int r : survivors) {
      if (r == leader) continue;
      Result sent = send(r, kShrinkTag, &slot, sizeof(slot));
      if (sent != tsrSuccess)
        return addContext(sent, "shrink (handing the child to survivor %d)", r);
    }
    if (prepared != tsrSuccess) return addContext(prepared, "shrink (preparing the child)");
  } else {
    Result got = recv(leader, kShrinkTag, &slot, sizeof(slot));
    if (got != tsrSuccess)
      return addContext(got,
                        "shrink (waiting for rank %d, the lowest survivor, to hand over the "
                        "child: is it excluded on some ranks, or dead?)",
                        leader);
    if (slot.ok != 1)
      return fail(tsrRemoteError, "shrink: rank %d, which creates the child, failed to create it",
                  leader);
    if (slot.childSize != childSize)
      return fail(tsrInvalidUsage,
                  "shrink: %d survivors here but %d at rank %d: every survivor must exclude the "
                  "same ranks",
                  childSize, slot.childSize, leader);
  }
  Result r = splitJoin(slot.payload, childRank, childSize, child);
  if (r != tsrSuccess)
    return addContext(r, "shrink (joining the child as rank %d of %d)", childRank, childSize);
  return tsrSuccess;
}

}  // namespace tessera
