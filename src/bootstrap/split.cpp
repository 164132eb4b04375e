// The split every kind without a native one uses: gather (color, key), let the lowest parent
// rank of each color prepare the child's shared state, pass it to the color's members through
// the parent, and have each member join.
#include <algorithm>
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace tessera {
namespace {

struct ColorKey {
  int32_t color;
  int32_t key;
};

// What the leader of a color hands its members: whether it succeeded, then the kind's payload.
struct SplitSlot {
  int32_t ok;
  int32_t childSize;
  uint8_t payload[128];
};

}  // namespace

Result Bootstrap::doSplit(int color, int key, std::unique_ptr<Bootstrap>* child) {
  static_assert(sizeof(SplitSlot::payload) == kSplitPayloadBytes);
  const int n = nranks();
  std::vector<ColorKey> all(static_cast<size_t>(n));
  all[static_cast<size_t>(rank())] = {color, key};
  Result result = allGather(all.data(), sizeof(ColorKey));
  if (result != tsrSuccess) return addContext(result, "split (exchanging colors)");

  // This color's members in child order: by key, then by parent rank.
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (color != TSR_SPLIT_NOCOLOR && all[static_cast<size_t>(r)].color == color)
      members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;
  });
  const int childSize = static_cast<int>(members.size());
  const int leader = members.empty() ? -1 : *std::min_element(members.begin(), members.end());

  std::vector<SplitSlot> slots(static_cast<size_t>(n));
  std::memset(slots.data(), 0, slots.size() * sizeof(SplitSlot));
  Result prepared = tsrSuccess;
  if (leader == rank()) {
    SplitSlot& mine = slots[static_cast<size_t>(rank())];
    prepared = splitPrepare(childSize, mine.payload);
    mine.ok = prepared == tsrSuccess ? 1 : 0;
    mine.childSize = childSize;
  }
  // Even a leader that failed takes part, so its members learn it at once instead of waiting.
  result = allGather(slots.data(), sizeof(SplitSlot));
  if (result != tsrSuccess) return addContext(result, "split (sharing the child)");
  if (prepared != tsrSuccess) return prepared;
  if (color == TSR_SPLIT_NOCOLOR) return tsrSuccess;

  const SplitSlot& fromLeader = slots[static_cast<size_t>(leader)];
  if (fromLeader.ok != 1)
    return fail(tsrRemoteError,
                "split: rank %d, which creates the child of color %d, failed to create it", leader,
                color);
  if (fromLeader.childSize != childSize)
    return fail(tsrInternalError, "split: color %d has %d members here but %d at rank %d", color,
                childSize, fromLeader.childSize, leader);
  const int childRank =
      static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  result = splitJoin(fromLeader.payload, childRank, childSize, child);
  if (result != tsrSuccess)
    return addContext(result, "split (joining the child of color %d as rank %d of %d)", color,
                      childRank, childSize);
  return tsrSuccess;
}

Result Bootstrap::splitPrepare(int childSize, uint8_t payload[kSplitPayloadBytes]) {
  return fail(tsrInternalError, "this kind of bootstrap does not implement split");
}

Result Bootstrap::splitJoin(const uint8_t payload[kSplitPayloadBytes], int childRank, int childSize,
                            std::unique_ptr<Bootstrap>* child) {
  return fail(tsrInternalError, "this kind of bootstrap does not implement split");
}

}  // namespace tessera
