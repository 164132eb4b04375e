// Path classes between ranks: placements on the synthetic two-socket server.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "support/harness.hpp"
#include "topo_test_util.hpp"
#include "topology/rank_path.hpp"

namespace tessera {
namespace {

RankPlacement placed(const char* host, uint64_t nonce, int dev, const char* busId) {
  RankPlacement p{};
  std::snprintf(p.hostId, sizeof(p.hostId), "%s", host);
  p.hostHash = std::hash<std::string>{}(host);
  p.processNonce = nonce;
  p.pid = static_cast<int32_t>(nonce);
  p.cudaDevice = dev;
  std::snprintf(p.busId, sizeof(p.busId), "%s", busId);
  return p;
}

class RankPath : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_SKIP_WITHOUT_HWLOC();
    ASSERT_EQ(Topology::loadXml(test::testDataDir() + "/topologies/two-socket-8gpu.xml", &topo_),
              tsrSuccess)
        << lastErrorMessage();
  }
  PathClass between(const RankPlacement& a, const RankPlacement& b) {
    PathClass c = PathClass::kLoc;
    EXPECT_EQ(rankPathClass(*topo_, a, b, &c), tsrSuccess) << lastErrorMessage();
    return c;
  }
  std::unique_ptr<Topology> topo_;
};

TEST_F(RankPath, ClassesFollowHostGpuAndTree) {
  auto g0 = placed("hostA", 1, 0, "0000:05:00.0");
  auto g1 = placed("hostA", 2, 1, "0000:06:00.0");      // same PCIe switch
  auto g2 = placed("hostA", 3, 2, "0000:0a:00.0");      // another switch, same host bridge
  auto g4 = placed("hostA", 8, 4, "0000:12:00.0");      // another root port, same host bridge
  auto g6 = placed("hostA", 4, 6, "0000:83:00.0");      // the other socket
  auto g0b = placed("hostA", 5, 0, "0000:05:00.0");     // another process on GPU 0
  auto host = placed("hostA", 6, -1, "");               // host-only rank
  auto remote = placed("hostB", 7, 0, "0000:05:00.0");  // same bus id, other host
  EXPECT_EQ(between(g0, g1), PathClass::kPix);
  EXPECT_EQ(between(g0, g2), PathClass::kPxb);
  EXPECT_EQ(between(g0, g4), PathClass::kPhb);
  EXPECT_EQ(between(g0, g6), PathClass::kSys);
  EXPECT_EQ(between(g0, g0b), PathClass::kLoc);
  EXPECT_EQ(between(g0, host), PathClass::kSys);
  EXPECT_EQ(between(g0, remote), PathClass::kNet);
  EXPECT_EQ(between(host, remote), PathClass::kNet);
}

TEST_F(RankPath, GpuUnknownToTheTopologyIsSys) {
  auto g0 = placed("hostA", 1, 0, "0000:05:00.0");
  auto hidden = placed("hostA", 2, 3, "0000:d0:00.0");
  EXPECT_EQ(between(g0, hidden), PathClass::kSys);
  EXPECT_EQ(rankPathClass(*topo_, g0, hidden, nullptr), tsrInvalidArgument);
}

}  // namespace
}  // namespace tessera
