// split for the inproc and tcp kinds: several colors, keys with ties, TSR_SPLIT_NOCOLOR, nested
// splits. Expected ranks and members are written out by hand, rank by rank.
#include <vector>

#include "bootstrap_test_util.hpp"

namespace tessera::test {
namespace {

class BootstrapSplit : public ::testing::TestWithParam<Kind> {};

// What a split must give one parent rank: its child rank, the child's size, and the parent
// ranks of the child's members in child order (what the child's allGather must show).
struct Expected {
  int childRank;
  int childSize;
  std::vector<int> members;
};

// Checks rank by rank that the child has the expected rank, size and members, that it works
// (allGather, send/recv to the next member, barrier), and that the parent still works.
void checkChild(Bootstrap& parent, const std::unique_ptr<Bootstrap>& child, const Expected& e) {
  if (e.childRank < 0) {
    EXPECT_EQ(child, nullptr) << "parent rank " << parent.rank() << " should get no child";
    return;
  }
  ASSERT_NE(child, nullptr) << "parent rank " << parent.rank();
  EXPECT_EQ(child->kind(), std::string(parent.kind()));
  EXPECT_EQ(child->rank(), e.childRank) << "parent rank " << parent.rank();
  ASSERT_EQ(child->nranks(), e.childSize) << "parent rank " << parent.rank();
  std::vector<int> members(static_cast<size_t>(e.childSize), -1);
  members[static_cast<size_t>(child->rank())] = parent.rank();
  ASSERT_EQ(child->allGather(members.data(), sizeof(int)), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(members, e.members) << "parent rank " << parent.rank();

  const int next = (child->rank() + 1) % e.childSize;
  const int prev = (child->rank() + e.childSize - 1) % e.childSize;
  int token = parent.rank() * 100;
  ASSERT_EQ(child->send(next, 4, &token, sizeof(token)), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(child->recv(prev, 4, &token, sizeof(token)), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(token, e.members[static_cast<size_t>(prev)] * 100);
  EXPECT_EQ(child->barrier(), tsrSuccess) << lastErrorMessage();
}

void checkParentStillWorks(Bootstrap& parent) {
  std::vector<int> all(static_cast<size_t>(parent.nranks()), -1);
  all[static_cast<size_t>(parent.rank())] = parent.rank() + 1000;
  ASSERT_EQ(parent.allGather(all.data(), sizeof(int)), tsrSuccess) << lastErrorMessage();
  for (int r = 0; r < parent.nranks(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], r + 1000);
}

TEST_P(BootstrapSplit, SeveralColorsKeysAndNoColor) {
  //            parent rank:  0  1  2  3   4  5
  const int color[6] = {0, 1, 0, 1, TSR_SPLIT_NOCOLOR, 0};
  const int key[6] = {5, 0, 5, 9, 0, 1};
  // Color 0: ranks 0 (key 5), 2 (key 5), 5 (key 1) -> order 5, 0, 2 (the tie by parent rank).
  // Color 1: ranks 1 (key 0), 3 (key 9) -> order 1, 3.
  const Expected expected[6] = {
      {1, 3, {5, 0, 2}}, {0, 2, {1, 3}}, {2, 3, {5, 0, 2}},
      {1, 2, {1, 3}},    {-1, 0, {}},    {0, 3, {5, 0, 2}},
  };
  runBootstrapRanks(GetParam(), 6, 20, [&](Bootstrap& b) {
    std::unique_ptr<Bootstrap> child;
    ASSERT_EQ(b.split(color[b.rank()], key[b.rank()], &child), tsrSuccess) << lastErrorMessage();
    checkChild(b, child, expected[b.rank()]);
    checkParentStillWorks(b);
  });
}

TEST_P(BootstrapSplit, OneColorWithReversedKeys) {
  runBootstrapRanks(GetParam(), 4, 20, [&](Bootstrap& b) {
    std::unique_ptr<Bootstrap> child;
    ASSERT_EQ(b.split(7, -b.rank(), &child), tsrSuccess) << lastErrorMessage();
    checkChild(b, child, Expected{3 - b.rank(), 4, {3, 2, 1, 0}});
  });
}

TEST_P(BootstrapSplit, EveryRankWithoutColorGetsNoChild) {
  runBootstrapRanks(GetParam(), 3, 20, [&](Bootstrap& b) {
    std::unique_ptr<Bootstrap> child;
    ASSERT_EQ(b.split(TSR_SPLIT_NOCOLOR, 0, &child), tsrSuccess) << lastErrorMessage();
    EXPECT_EQ(child, nullptr);
    checkParentStillWorks(b);
  });
}

// A split of a split, and consecutive splits of one parent.
TEST_P(BootstrapSplit, NestedAndRepeatedSplits) {
  runBootstrapRanks(GetParam(), 5, 20, [&](Bootstrap& b) {
    // Evens and odds, same key: child order is parent order.
    std::unique_ptr<Bootstrap> half;
    ASSERT_EQ(b.split(b.rank() % 2, 0, &half), tsrSuccess) << lastErrorMessage();
    const std::vector<int> evens{0, 2, 4}, odds{1, 3};
    const std::vector<int>& mine = b.rank() % 2 == 0 ? evens : odds;
    checkChild(b, half, Expected{b.rank() / 2, static_cast<int>(mine.size()), mine});

    // Split the halves again: the first member of each half alone, the rest together.
    std::unique_ptr<Bootstrap> quarter;
    ASSERT_EQ(half->split(half->rank() == 0 ? 1 : 2, 0, &quarter), tsrSuccess)
        << lastErrorMessage();
    ASSERT_NE(quarter, nullptr);
    const int expectedSize = half->rank() == 0 ? 1 : half->nranks() - 1;
    EXPECT_EQ(quarter->nranks(), expectedSize);
    EXPECT_EQ(quarter->rank(), half->rank() == 0 ? 0 : half->rank() - 1);
    std::vector<int> who(static_cast<size_t>(quarter->nranks()), -1);
    who[static_cast<size_t>(quarter->rank())] = b.rank();
    ASSERT_EQ(quarter->allGather(who.data(), sizeof(int)), tsrSuccess) << lastErrorMessage();
    std::vector<int> expectedWho = half->rank() == 0
                                       ? std::vector<int>{mine[0]}
                                       : std::vector<int>(mine.begin() + 1, mine.end());
    EXPECT_EQ(who, expectedWho) << "parent rank " << b.rank();

    // Another split of the same parent, all in one color, keys reversed.
    std::unique_ptr<Bootstrap> again;
    ASSERT_EQ(b.split(3, 10 - b.rank(), &again), tsrSuccess) << lastErrorMessage();
    checkChild(b, again, Expected{4 - b.rank(), 5, {4, 3, 2, 1, 0}});
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, BootstrapSplit, ::testing::Values(Kind::kInproc, Kind::kTcp),
                         [](const auto& p) { return std::string(kindName(p.param)); });

}  // namespace
}  // namespace tessera::test
