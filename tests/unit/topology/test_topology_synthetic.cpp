// Path classes, NICs and CPU locality on small synthetic machines (tests/data/topologies),
// against expectations read off each file's tree by hand (see the comment in each file).
#include <string>
#include <vector>

#include "topo_test_util.hpp"

namespace tessera {
namespace {

using test::fullClass;
using test::pciClass;

constexpr PathClass LOC = PathClass::kLoc, NVL = PathClass::kNvl, PIX = PathClass::kPix,
                    PXB = PathClass::kPxb, PHB = PathClass::kPhb, SYS = PathClass::kSys;

const std::vector<std::string> kTwoSocketGpus = {"0000:05:00.0", "0000:06:00.0", "0000:0a:00.0",
                                                 "0000:0b:00.0", "0000:12:00.0", "0000:13:00.0",
                                                 "0000:83:00.0", "0000:84:00.0"};

// Socket 0: switch B {05, 06} and switch C {0a, 0b} below switch A, on root port 00:01.0;
// switch D {12, 13} on root port 00:02.0 of the same host bridge. Socket 1: switch E {83, 84}.
const PathClass kTwoSocketExpected[8][8] = {
    //   05   06   0a   0b   12   13   83   84
    {LOC, PIX, PXB, PXB, PHB, PHB, SYS, SYS},  // 05
    {PIX, LOC, PXB, PXB, PHB, PHB, SYS, SYS},  // 06
    {PXB, PXB, LOC, PIX, PHB, PHB, SYS, SYS},  // 0a
    {PXB, PXB, PIX, LOC, PHB, PHB, SYS, SYS},  // 0b
    {PHB, PHB, PHB, PHB, LOC, PIX, SYS, SYS},  // 12
    {PHB, PHB, PHB, PHB, PIX, LOC, SYS, SYS},  // 13
    {SYS, SYS, SYS, SYS, SYS, SYS, LOC, PIX},  // 83
    {SYS, SYS, SYS, SYS, SYS, SYS, PIX, LOC},  // 84
};

class TopoTwoSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_SKIP_WITHOUT_HWLOC();
    topo_ = test::loadXmlOrFail(test::topologyDataFile("two-socket-8gpu.xml"));
    ASSERT_NE(topo_, nullptr);
  }
  std::unique_ptr<Topology> topo_;
};

TEST_F(TopoTwoSocket, CountsHostResources) {
  const Topology& t = *topo_;
  EXPECT_TRUE(t.hasPciInfo());
  ASSERT_EQ(t.numaNodes().size(), 2u);
  EXPECT_EQ(t.numaNodes()[0].osIndex, 0);
  EXPECT_EQ(t.numaNodes()[0].memoryBytes, 64ull << 30);
  EXPECT_EQ(t.numaNodes()[1].osIndex, 1);
  EXPECT_EQ(t.numaNodes()[1].memoryBytes, 32ull << 30);
  EXPECT_EQ(t.packageCount(), 2);
  EXPECT_EQ(t.coreCount(), 8);
  EXPECT_EQ(t.puCount(), 8);
  EXPECT_TRUE(t.nvswitches().empty());
  EXPECT_EQ(t.nvlinkSource(), NvlinkSource::kNone);
}

TEST_F(TopoTwoSocket, FindsGpusInBusOrder) {
  const Topology& t = *topo_;
  ASSERT_EQ(t.gpus().size(), kTwoSocketGpus.size());
  for (size_t i = 0; i < kTwoSocketGpus.size(); ++i) {
    EXPECT_EQ(t.gpus()[i].busId, kTwoSocketGpus[i]);
    EXPECT_EQ(t.gpus()[i].numaNode, i < 6 ? 0 : 1) << kTwoSocketGpus[i];
  }
  EXPECT_EQ(t.gpus()[0].model, "Synthetic H100");
}

TEST_F(TopoTwoSocket, EveryPairHasTheClassTheTreeSays) {
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      const std::string& a = kTwoSocketGpus[i];
      const std::string& b = kTwoSocketGpus[j];
      EXPECT_EQ(pciClass(*topo_, a, b), kTwoSocketExpected[i][j]) << a << " - " << b;
      // No NVLink in this machine: the full class is the PCI class.
      EXPECT_EQ(fullClass(*topo_, a, b), kTwoSocketExpected[i][j]) << a << " - " << b;
    }
  }
}

TEST_F(TopoTwoSocket, LookupsAcceptOtherSpellings) {
  EXPECT_EQ(pciClass(*topo_, "05:00.0", "0000:06:00.0"), PIX);
  EXPECT_EQ(pciClass(*topo_, "00000000:0A:00.0", "0B:00.0"), PIX);
  EXPECT_EQ(pciClass(*topo_, "0000:05:00.0", "5:0.0"), LOC);
  EXPECT_EQ(topo_->gpuIndex("84:00.0"), 7);
  EXPECT_EQ(topo_->gpuIndex("0000:07:00.0"), -1);  // the NIC is not a GPU
}

TEST_F(TopoTwoSocket, FindsBothNics) {
  const Topology& t = *topo_;
  ASSERT_EQ(t.nics().size(), 2u);
  const NicInfo* ib = nullptr;
  const NicInfo* eth = nullptr;
  for (const NicInfo& n : t.nics()) {
    if (n.busId == "0000:07:00.0") ib = &n;
    if (n.busId == "0000:85:00.0") eth = &n;
  }
  ASSERT_NE(ib, nullptr);
  ASSERT_NE(eth, nullptr);
  EXPECT_EQ(ib->names, (std::vector<std::string>{"mlx5_0", "ib0"}));  // verbs name first
  EXPECT_EQ(ib->numaNode, 0);
  EXPECT_EQ(eth->names, (std::vector<std::string>{"ens85f0"}));
  EXPECT_EQ(eth->numaNode, 1);
}

TEST_F(TopoTwoSocket, NearestNicOfEachGpu) {
  struct Case {
    const char* gpu;
    const char* nic;
    PathClass path;
  };
  const Case cases[] = {
      {"0000:05:00.0", "0000:07:00.0", PIX}, {"0000:06:00.0", "0000:07:00.0", PIX},
      {"0000:0a:00.0", "0000:07:00.0", PXB}, {"0000:0b:00.0", "0000:07:00.0", PXB},
      {"0000:12:00.0", "0000:07:00.0", PHB}, {"0000:13:00.0", "0000:07:00.0", PHB},
      {"0000:83:00.0", "0000:85:00.0", PHB}, {"0000:84:00.0", "0000:85:00.0", PHB},
  };
  for (const Case& c : cases) {
    int nic = -2;
    PathClass path = PathClass::kNet;
    ASSERT_EQ(topo_->nearestNic(c.gpu, &nic, &path), tsrSuccess) << lastErrorMessage();
    ASSERT_GE(nic, 0) << c.gpu;
    EXPECT_EQ(topo_->nics()[static_cast<size_t>(nic)].busId, c.nic) << c.gpu;
    EXPECT_EQ(path, c.path) << c.gpu;
  }
}

TEST_F(TopoTwoSocket, LocalCpusFollowTheSocket) {
  std::vector<int> cpus;
  ASSERT_EQ(topo_->localCpus("0000:0b:00.0", &cpus), tsrSuccess);
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(topo_->localCpus("84:00.0", &cpus), tsrSuccess);
  EXPECT_EQ(cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(formatCpuList(cpus), "4-7");
}

TEST_F(TopoTwoSocket, UnknownBusIdIsAnError) {
  PathClass c;
  EXPECT_EQ(topo_->gpuPathClass("0000:99:00.0", "0000:05:00.0", &c), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("0000:99:00.0"), std::string::npos)
      << lastErrorMessage();
  EXPECT_EQ(topo_->gpuPciPathClass("0000:05:00.0", "garbage", &c), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("garbage"), std::string::npos);
  int nic;
  EXPECT_EQ(topo_->nearestNic("0000:07:00.0", &nic, nullptr), tsrInvalidArgument);
  std::vector<int> cpus;
  EXPECT_EQ(topo_->localCpus("", &cpus), tsrInvalidArgument);
}

TEST_F(TopoTwoSocket, SummaryShowsGpusNicsAndMatrix) {
  std::string s = topo_->summary();
  for (const std::string& bus : kTwoSocketGpus) EXPECT_NE(s.find(bus), std::string::npos) << s;
  EXPECT_NE(s.find("GPUs: 8"), std::string::npos) << s;
  EXPECT_NE(s.find("mlx5_0"), std::string::npos) << s;
  EXPECT_NE(s.find("ens85f0"), std::string::npos) << s;
  EXPECT_NE(s.find("NUMA nodes: 2"), std::string::npos) << s;
  EXPECT_NE(s.find("two-socket-8gpu.xml"), std::string::npos) << s;
  // GPU0's row of the matrix, as the expectations above say.
  EXPECT_NE(s.find("GPU0  X     PIX   PXB   PXB   PHB   PHB   SYS   SYS   PIX   SYS"),
            std::string::npos)
      << s;
}

// ---- NVLink from hwloc distances: direct links and an NVSwitch ----------------------------

class TopoNvlinkDistances : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_SKIP_WITHOUT_HWLOC();
    topo_ = test::loadXmlOrFail(test::topologyDataFile("nvlink-4gpu.xml"));
    ASSERT_NE(topo_, nullptr);
  }
  std::unique_ptr<Topology> topo_;
};

TEST_F(TopoNvlinkDistances, DirectAndSwitchedLinksAreNvl) {
  const Topology& t = *topo_;
  ASSERT_EQ(t.gpus().size(), 4u);
  EXPECT_EQ(t.nvlinkSource(), NvlinkSource::kHwlocDistances);
  EXPECT_EQ(t.nvswitches(), (std::vector<std::string>{"0000:20:00.0"}));
  EXPECT_EQ(fullClass(t, "03:00.0", "04:00.0"), NVL);  // direct
  EXPECT_EQ(fullClass(t, "03:00.0", "12:00.0"), NVL);  // direct, across root ports
  EXPECT_EQ(fullClass(t, "12:00.0", "13:00.0"), NVL);  // through the NVSwitch
  EXPECT_EQ(fullClass(t, "03:00.0", "13:00.0"), PHB);  // no link: the PCI path
  EXPECT_EQ(fullClass(t, "04:00.0", "12:00.0"), PHB);
  EXPECT_EQ(fullClass(t, "04:00.0", "13:00.0"), PHB);
  EXPECT_EQ(fullClass(t, "13:00.0", "13:00.0"), LOC);
}

TEST_F(TopoNvlinkDistances, PciClassIgnoresNvlink) {
  const Topology& t = *topo_;
  EXPECT_EQ(pciClass(t, "03:00.0", "04:00.0"), PIX);
  EXPECT_EQ(pciClass(t, "12:00.0", "13:00.0"), PIX);
  EXPECT_EQ(pciClass(t, "03:00.0", "12:00.0"), PHB);
  EXPECT_EQ(pciClass(t, "04:00.0", "13:00.0"), PHB);
}

TEST_F(TopoNvlinkDistances, NoNicMeansNoNearestNic) {
  EXPECT_TRUE(topo_->nics().empty());
  int nic = 5;
  PathClass path = PathClass::kLoc;
  ASSERT_EQ(topo_->nearestNic("03:00.0", &nic, &path), tsrSuccess);
  EXPECT_EQ(nic, -1);
  std::string s = topo_->summary();
  EXPECT_NE(s.find("NICs: none"), std::string::npos) << s;
  EXPECT_NE(s.find("NVLinkBandwidth"), std::string::npos) << s;
  EXPECT_NE(s.find("GPU2  NVL   PHB   X     NVL"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera
