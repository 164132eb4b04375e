// Where ranks live, as the communicator sees it after init.
#include <gtest/gtest.h>

#include <vector>

#include "comm/comm_impl.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {

TEST(CommPlacement, ThreadRanksShareOneProcessAndHost) {
  std::vector<std::unique_ptr<Communicator>> comms;
  ASSERT_EQ(Communicator::initAll(3, nullptr, &comms), tsrSuccess);
  for (int r = 0; r < 3; ++r) {
    CommImpl* c = comms[static_cast<size_t>(r)]->impl();
    EXPECT_EQ(c->localRanks(), 3);
    EXPECT_EQ(c->localRank(), r);
    for (int p = 0; p < 3; ++p) EXPECT_EQ(c->localityOf(p), Locality::kSameProcess);
    EXPECT_EQ(c->placements().size(), 3u);
    // Every rank computed the same communicator hash from the same placements.
    EXPECT_EQ(c->commHash(), comms[0]->impl()->commHash());
  }
}

}  // namespace
}  // namespace tessera
