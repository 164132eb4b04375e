// Where ranks live, as the communicator sees it after init.
#include <gtest/gtest.h>

#include <vector>

#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {

TEST(CommPlacement, ThreadRanksShareOneProcessAndHost) {
  std::vector<std::unique_ptr<Communicator>> comms;
  ASSERT_EQ(Communicator::initAll(3, nullptr, &comms), tsrSuccess);
  for (int r = 0; r < 3; ++r) {
    CommImpl* c = tessera::commImpl(*comms[static_cast<size_t>(r)]);
    EXPECT_EQ(c->localRanks(), 3);
    EXPECT_EQ(c->localRank(), r);
    for (int p = 0; p < 3; ++p) EXPECT_EQ(c->localityOf(p), Locality::kSameProcess);
    EXPECT_EQ(c->placements().size(), 3u);
    // Every rank computed the same communicator hash from the same placements.
    EXPECT_EQ(c->commHash(), tessera::commImpl(*comms[0])->commHash());
  }
}

TEST(CommPlacement, PathClassesBetweenHostOnlyRanks) {
  std::vector<std::unique_ptr<Communicator>> comms;
  int devs[] = {TSR_DEVICE_HOST, TSR_DEVICE_HOST};
  ASSERT_EQ(Communicator::initAll(2, devs, &comms), tsrSuccess);
  PathClass c = PathClass::kLoc;
  // Host-only ranks of one host meet in host memory.
  ASSERT_EQ(tessera::commImpl(*comms[0])->pathClassTo(1, &c), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(c, PathClass::kSys);
  EXPECT_EQ(tessera::commImpl(*comms[0])->pathClassTo(2, &c), tsrInvalidArgument);
}

}  // namespace
}  // namespace tessera
