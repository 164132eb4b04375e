// tsrCommGetUniqueId and tsrCommGrow on thread ranks: the ranks of a communicator and new ranks
// (threads that have no communicator) form a larger one; every rank's all-reduce on it equals a
// serial sum, each keeps or gets the rank it should, and the old communicator still works.
// Bad input: each refusal is a sentence, refused on every existing rank alike when they
// disagree, and leaves the communicator usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shrink_support.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"

namespace {

using tessera::test::Boot;
using tessera::test::expectShrunkWorks;
using tessera::test::makeComms;

bool says(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

struct GrowCase {
  Boot boot;
  int from;
  int to;
  int holder;  // the existing rank that calls tsrCommGetUniqueId
};

class CommGrow : public ::testing::TestWithParam<GrowCase> {};

TEST_P(CommGrow, ExistingAndNewRanksReduceRight) {
  const GrowCase g = GetParam();
  std::vector<tsrComm_t> old = makeComms(g.boot, g.from);
  tsrUniqueId id;
  ASSERT_EQ(tsrCommGetUniqueId(old[static_cast<size_t>(g.holder)], &id), tsrSuccess)
      << tsrGetLastError(nullptr);
  std::vector<tsrComm_t> grown(static_cast<size_t>(g.to), nullptr);
  tessera::test::runRanks(g.to, [&](int r) {
    tsrComm_t* out = &grown[static_cast<size_t>(r)];
    if (r < g.from) {  // an existing rank: keeps its rank, passes -1; the holder passes the id
      EXPECT_EQ(tsrCommGrow(old[static_cast<size_t>(r)], g.to, r == g.holder ? &id : nullptr, -1,
                            out, nullptr),
                tsrSuccess)
          << tsrGetLastError(nullptr);
    } else {  // a new rank: no communicator, the id and its own rank
      EXPECT_EQ(tsrCommGrow(nullptr, g.to, &id, r, out, nullptr), tsrSuccess)
          << tsrGetLastError(nullptr);
    }
  });
  for (tsrComm_t c : grown) ASSERT_NE(c, nullptr);
  std::vector<int> everyone;
  for (int r = 0; r < g.to; ++r) everyone.push_back(r);
  expectShrunkWorks(grown, everyone);  // ranks 0..to-1 in order, a serial sum over all
  // The old communicator is untouched by the grow.
  std::vector<int> before;
  for (int r = 0; r < g.from; ++r) before.push_back(r);
  expectShrunkWorks(old, before);
  // The holder may ask for another id once its grow has used the first.
  tsrUniqueId again;
  EXPECT_EQ(tsrCommGetUniqueId(old[static_cast<size_t>(g.holder)], &again), tsrSuccess)
      << tsrGetLastError(nullptr);
  for (tsrComm_t c : grown) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
  for (tsrComm_t c : old) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommGrow,
                         ::testing::Values(GrowCase{Boot::kUniqueId, 3, 4, 0},
                                           GrowCase{Boot::kInproc, 3, 4, 2},
                                           GrowCase{Boot::kUniqueId, 1, 3, 0},
                                           GrowCase{Boot::kUniqueId, 2, 5, 1}),
                         [](const ::testing::TestParamInfo<GrowCase>& p) {
                           const GrowCase& g = p.param;
                           return std::string(g.boot == Boot::kInproc ? "InitAll" : "UniqueId") +
                                  std::to_string(g.from) + "To" + std::to_string(g.to) + "Holder" +
                                  std::to_string(g.holder);
                         });

// Existing ranks that disagree (nranks, who holds the id, a size that does not grow) are each
// refused with the same sentence, at once, and nothing changes: the pair still reduces right.
TEST(CommGrowBadInput, ExistingRanksThatDisagreeAreAllRefused) {
  std::vector<tsrComm_t> comms = makeComms(Boot::kUniqueId, 2);
  tsrUniqueId id;
  struct Case {
    std::vector<int> nranks;   // per existing rank
    std::vector<bool> passId;  // per existing rank
    const char* says;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {true, false}, "rank 0 asks for 3 ranks, rank 1 for 4"},
      {{2, 2}, {true, false}, "nranks is 2; a grow needs more than the 2 ranks"},
      {{3, 3}, {false, false}, "0 existing ranks passed a unique id (none)"},
      {{3, 3}, {true, true}, "2 existing ranks passed a unique id (0, 1)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    ASSERT_EQ(tsrCommGetUniqueId(comms[0], &id), tsrSuccess) << tsrGetLastError(nullptr);
    std::vector<std::string> why(2);
    tessera::test::runRanks(2, [&](int r) {
      const size_t i = static_cast<size_t>(r);
      tsrComm_t out = reinterpret_cast<tsrComm_t>(0x1);
      EXPECT_EQ(tsrCommGrow(comms[i], c.nranks[i], c.passId[i] ? &id : nullptr, -1, &out, nullptr),
                tsrInvalidArgument);
      EXPECT_EQ(out, nullptr);
      why[i] = tsrGetLastError(nullptr);
    });
    for (int r = 0; r < 2; ++r)
      EXPECT_TRUE(says(why[static_cast<size_t>(r)], c.says)) << why[static_cast<size_t>(r)];
    // The refused grow used the id: rank 0 may ask for the next one (the loop's next case).
    tessera::test::expectPairStillReduces(comms);
  }
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

// A new rank that claims an existing rank's number: the bootstrap root refuses one of the two
// and fails the others that came, so every caller gets an error (none hangs) and the old
// communicator still works.
TEST(CommGrowBadInput, ANewRankWithAnExistingRanksNumberFailsEveryone) {
  std::vector<tsrComm_t> comms = makeComms(Boot::kUniqueId, 2);
  tsrUniqueId id;
  ASSERT_EQ(tsrCommGetUniqueId(comms[0], &id), tsrSuccess) << tsrGetLastError(nullptr);
  std::vector<tsrResult_t> got(3, tsrSuccess);
  std::vector<std::string> why(3);
  tessera::test::runRanks(3, [&](int r) {
    const size_t i = static_cast<size_t>(r);
    tsrComm_t out = nullptr;
    got[i] = r < 2 ? tsrCommGrow(comms[i], 3, r == 0 ? &id : nullptr, -1, &out, nullptr)
                   : tsrCommGrow(nullptr, 3, &id, 1, &out, nullptr);  // rank 1 is taken
    why[i] = tsrGetLastError(nullptr);
    EXPECT_EQ(out, nullptr);
  });
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NE(got[i], tsrSuccess) << "caller " << i;
    EXPECT_TRUE(says(why[i], "two ranks say they are rank 1")) << why[i];
  }
  tessera::test::expectPairStillReduces(comms);
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

TEST(CommGrowBadInput, RefusedWithASentence) {
  std::vector<tsrComm_t> comms = makeComms(Boot::kInproc, 2);
  tsrUniqueId id;
  EXPECT_EQ(tsrCommGetUniqueId(nullptr, &id), tsrInvalidArgument);
  EXPECT_EQ(tsrCommGetUniqueId(comms[0], nullptr), tsrInvalidArgument);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "uniqueId is NULL")) << tsrGetLastError(nullptr);
  ASSERT_EQ(tsrCommGetUniqueId(comms[0], &id), tsrSuccess) << tsrGetLastError(nullptr);
  // One id at a time per rank, until its grow has used it.
  tsrUniqueId second;
  EXPECT_EQ(tsrCommGetUniqueId(comms[0], &second), tsrInvalidUsage);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "has not been used by tsrCommGrow yet"))
      << tsrGetLastError(nullptr);

  tsrComm_t out = reinterpret_cast<tsrComm_t>(0x1);
  EXPECT_EQ(tsrCommGrow(comms[0], 3, &id, -1, nullptr, nullptr), tsrInvalidArgument);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "newcomm is NULL")) << tsrGetLastError(nullptr);
  // A new rank without an id.
  EXPECT_EQ(tsrCommGrow(nullptr, 3, nullptr, 2, &out, nullptr), tsrInvalidArgument);
  EXPECT_EQ(out, nullptr);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "needs the unique id")) << tsrGetLastError(nullptr);
  // A new rank whose rank is outside [0, nranks).
  out = reinterpret_cast<tsrComm_t>(0x1);
  EXPECT_EQ(tsrCommGrow(nullptr, 3, &id, 3, &out, nullptr), tsrInvalidArgument);
  EXPECT_EQ(out, nullptr);
  // An existing rank that names a rank: it keeps its own.
  out = reinterpret_cast<tsrComm_t>(0x1);
  EXPECT_EQ(tsrCommGrow(comms[1], 3, nullptr, 1, &out, nullptr), tsrInvalidArgument);
  EXPECT_EQ(out, nullptr);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "rank is 1; an existing rank keeps its rank 1"))
      << tsrGetLastError(nullptr);
  // A garbage id, from a new rank.
  tsrUniqueId garbage;
  for (size_t i = 0; i < sizeof garbage.internal; ++i)
    garbage.internal[i] = static_cast<char>(i * 7 + 3);
  EXPECT_EQ(tsrCommGrow(nullptr, 3, &garbage, 2, &out, nullptr), tsrInvalidArgument);
  EXPECT_EQ(out, nullptr);
  // None of it touched the communicator.
  tessera::test::expectPairStillReduces(comms);
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

}  // namespace
