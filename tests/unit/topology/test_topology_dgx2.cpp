// The NVIDIA DGX-2H topology from ../shared/topologies (hwloc's own test file). Expected values
// were read from the XML by hand:
// - 2 packages, each with 1 NUMA node (P#0: 810234351616 bytes, P#1: 811737923584 bytes) and
//   2 cores of 1 PU (P#0, P#1 and P#24, P#25): the file is trimmed to 4 cores.
// - 16 V100 GPUs on 4 PCIe host bridges, 2 per package. Below each host bridge a root port,
//   a first PLX switch, then two second-level switches with 2 GPUs each:
//     package 0: host bridge [2b-3b]: {34, 36} {39, 3b};  host bridge [4e-67]: {57, 59} {5c, 5e}
//     package 1: host bridge [ae-c7]: {b7, b9} {bc, be};  host bridge [d7-e7]: {e0, e2} {e5, e7}
//   so PIX within a pair, PXB within a host bridge, PHB within a package, SYS across.
// - 12 NVSwitches (61-67 without 64, c1-c7 without c4); the NVLinkBandwidth matrix links
//   GPUs 0-7 to the first six and GPUs 8-15 to the other six: every GPU pair is NVL.
// - No network device at all (no PCI class 02xx, no network/openfabrics OS device).
#include <string>
#include <vector>

#include "topo_test_util.hpp"

namespace tessera {
namespace {

using test::fullClass;
using test::pciClass;

const std::vector<std::string> kGpus = {
    "0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0",  // host bridge [2b-3b]
    "0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0",  // host bridge [4e-67]
    "0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0",  // host bridge [ae-c7]
    "0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0", "0000:e7:00.0",  // host bridge [d7-e7]
};

// From the grouping above: GPUs 2k and 2k+1 share a switch, 4k..4k+3 a host bridge,
// 8k..8k+7 a package.
PathClass expectedPci(size_t i, size_t j) {
  if (i == j) return PathClass::kLoc;
  if (i / 2 == j / 2) return PathClass::kPix;
  if (i / 4 == j / 4) return PathClass::kPxb;
  if (i / 8 == j / 8) return PathClass::kPhb;
  return PathClass::kSys;
}

class TopoDgx2 : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_SKIP_WITHOUT_HWLOC();
    std::string dir = test::sharedTopologiesDir();
    if (dir.empty())
      GTEST_SKIP() << "../shared/topologies is absent (a user's clone has no shared folder)";
    path_ = dir + "/nvidia-dgx2.xml";
    topo_ = test::loadXmlOrFail(path_);
    ASSERT_NE(topo_, nullptr);
  }
  std::string path_;
  std::unique_ptr<Topology> topo_;
};

TEST_F(TopoDgx2, HostResources) {
  const Topology& t = *topo_;
  ASSERT_EQ(t.numaNodes().size(), 2u);
  EXPECT_EQ(t.numaNodes()[0].osIndex, 0);
  EXPECT_EQ(t.numaNodes()[0].memoryBytes, 810234351616ull);
  EXPECT_EQ(t.numaNodes()[1].osIndex, 1);
  EXPECT_EQ(t.numaNodes()[1].memoryBytes, 811737923584ull);
  EXPECT_EQ(t.packageCount(), 2);
  EXPECT_EQ(t.coreCount(), 4);
  EXPECT_EQ(t.puCount(), 4);
}

TEST_F(TopoDgx2, SixteenGpusWithTheirNumaNodes) {
  const Topology& t = *topo_;
  ASSERT_EQ(t.gpus().size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    const GpuInfo& g = t.gpus()[i];
    EXPECT_EQ(g.busId, kGpus[i]);
    EXPECT_EQ(g.numaNode, i < 8 ? 0 : 1) << g.busId;
    EXPECT_EQ(g.cpus, i < 8 ? (std::vector<int>{0, 1}) : (std::vector<int>{24, 25})) << g.busId;
    EXPECT_EQ(g.model, "Tesla V100-SXM3-32GB-H");
  }
}

TEST_F(TopoDgx2, TwelveNvswitches) {
  const std::vector<std::string> expected = {"0000:61:00.0", "0000:62:00.0", "0000:63:00.0",
                                             "0000:65:00.0", "0000:66:00.0", "0000:67:00.0",
                                             "0000:c1:00.0", "0000:c2:00.0", "0000:c3:00.0",
                                             "0000:c5:00.0", "0000:c6:00.0", "0000:c7:00.0"};
  EXPECT_EQ(topo_->nvswitches(), expected);
}

TEST_F(TopoDgx2, EveryGpuPairIsNvlink) {
  EXPECT_EQ(topo_->nvlinkSource(), NvlinkSource::kHwlocDistances);
  for (size_t i = 0; i < 16; ++i)
    for (size_t j = 0; j < 16; ++j)
      EXPECT_EQ(fullClass(*topo_, kGpus[i], kGpus[j]), i == j ? PathClass::kLoc : PathClass::kNvl)
          << kGpus[i] << " - " << kGpus[j];
}

TEST_F(TopoDgx2, PciClassesFollowTheSwitchTree) {
  for (size_t i = 0; i < 16; ++i)
    for (size_t j = 0; j < 16; ++j)
      EXPECT_EQ(pciClass(*topo_, kGpus[i], kGpus[j]), expectedPci(i, j))
          << kGpus[i] << " - " << kGpus[j];
}

TEST_F(TopoDgx2, LookupsAcceptCaseAndShortForms) {
  EXPECT_EQ(topo_->gpuIndex("3B:00.0"), 3);
  EXPECT_EQ(topo_->gpuIndex("00000000:3B:00.0"), 3);
  EXPECT_EQ(topo_->gpuIndex("0000:E7:00.0"), 15);
  EXPECT_EQ(pciClass(*topo_, "34:00.0", "0000:36:00.0"), PathClass::kPix);
  std::vector<int> cpus;
  ASSERT_EQ(topo_->localCpus("B7:00.0", &cpus), tsrSuccess);
  EXPECT_EQ(cpus, (std::vector<int>{24, 25}));
}

TEST_F(TopoDgx2, HasNoNics) {
  // The file carries no network device, so there is no NIC to pick.
  EXPECT_TRUE(topo_->nics().empty());
  int nic = 0;
  ASSERT_EQ(topo_->nearestNic("0000:34:00.0", &nic, nullptr), tsrSuccess);
  EXPECT_EQ(nic, -1);
}

TEST_F(TopoDgx2, SummaryMentionsGpusAndNvlink) {
  std::string s = topo_->summary();
  for (const std::string& bus : kGpus) EXPECT_NE(s.find(bus), std::string::npos) << s;
  EXPECT_NE(s.find("GPUs: 16"), std::string::npos) << s;
  EXPECT_NE(s.find("NVSwitches: 12"), std::string::npos) << s;
  EXPECT_NE(s.find("from hwloc distances"), std::string::npos) << s;
  EXPECT_NE(s.find("GPU15"), std::string::npos) << s;
  EXPECT_NE(s.find("NVL   NVL   NVL"), std::string::npos) << s;
}

TEST_F(TopoDgx2, LoadsThroughTesseraTopoFile) {
  test::ScopedEnv env("TESSERA_TOPO_FILE", path_.c_str());
  std::unique_ptr<Topology> t;
  ASSERT_EQ(Topology::load(&t), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(t->source(), path_);
  EXPECT_EQ(t->gpus().size(), 16u);
  // A file describes another machine: NVML is not asked, hwloc's matrix is used.
  EXPECT_EQ(t->nvlinkSource(), NvlinkSource::kHwlocDistances);
  EXPECT_EQ(fullClass(*t, kGpus[0], kGpus[15]), PathClass::kNvl);
}

}  // namespace
}  // namespace tessera
