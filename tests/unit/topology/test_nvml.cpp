// The NVML path of NVLink discovery, run against a fake libnvidia-ml (fake_nvml.cpp) that
// describes nvlink-4gpu.xml's GPUs with different links than the file's hwloc distances.
#include <string>
#include <vector>

#include "topo_test_util.hpp"
#include "topology/nvml_loader.hpp"

namespace tessera {
namespace {

std::vector<PciBusId> fourGpus() {
  std::vector<PciBusId> ids(4);
  const char* names[] = {"0000:03:00.0", "0000:04:00.0", "0000:12:00.0", "0000:13:00.0"};
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(tryParsePciBusId(names[i], &ids[i]));
  return ids;
}

TEST(TopoNvml, FakeLibraryReportsItsLinks) {
  NvlinkEdges e;
  std::string why;
  ASSERT_TRUE(nvmlQueryNvlinks(TESSERA_FAKE_NVML, fourGpus(), &e, &why)) << why;
  // 03 <-> 04 direct; 04 and 13 on the NVSwitch; 12 alone.
  const size_t n = 4;
  EXPECT_TRUE(e.connected(n, 0, 1));
  EXPECT_TRUE(e.connected(n, 1, 0));
  EXPECT_TRUE(e.connected(n, 1, 3));
  EXPECT_FALSE(e.connected(n, 0, 3));
  EXPECT_FALSE(e.connected(n, 0, 2));
  EXPECT_FALSE(e.connected(n, 2, 3));
  EXPECT_EQ(e.toSwitch, (std::vector<uint8_t>{0, 1, 0, 1}));
}

TEST(TopoNvml, AbsentLibraryIsNotAnError) {
  NvlinkEdges e;
  std::string why;
  EXPECT_FALSE(nvmlQueryNvlinks("/nonexistent/libnvidia-ml.so.1", fourGpus(), &e, &why));
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
}

TEST(TopoNvml, LibraryWithoutNvmlSymbolsIsRefused) {
  NvlinkEdges e;
  std::string why;
  EXPECT_FALSE(nvmlQueryNvlinks("libm.so.6", fourGpus(), &e, &why));
  EXPECT_NE(why.find("nvmlInit_v2"), std::string::npos) << why;
}

TEST(TopoNvml, InitFailureIsReported) {
  test::ScopedEnv fail("FAKE_NVML_INIT_FAIL", "1");
  NvlinkEdges e;
  std::string why;
  EXPECT_FALSE(nvmlQueryNvlinks(TESSERA_FAKE_NVML, fourGpus(), &e, &why));
  EXPECT_NE(why.find("Driver Not Loaded"), std::string::npos) << why;
}

TEST(TopoNvml, TopologyPrefersNvmlOverDistances) {
  TSR_SKIP_WITHOUT_HWLOC();
  TopologyOptions o;
  o.xmlPath = test::topologyDataFile("nvlink-4gpu.xml");
  o.useNvml = true;
  o.nvmlLibrary = TESSERA_FAKE_NVML;
  std::unique_ptr<Topology> t;
  ASSERT_EQ(Topology::load(o, &t), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(t->nvlinkSource(), NvlinkSource::kNvml);
  EXPECT_EQ(test::fullClass(*t, "03:00.0", "04:00.0"), PathClass::kNvl);
  EXPECT_EQ(test::fullClass(*t, "04:00.0", "13:00.0"), PathClass::kNvl);  // via the switch
  EXPECT_EQ(test::fullClass(*t, "03:00.0", "12:00.0"), PathClass::kPhb);  // hwloc said NVL
  EXPECT_EQ(test::fullClass(*t, "12:00.0", "13:00.0"), PathClass::kPix);  // hwloc said NVL
  EXPECT_NE(t->summary().find("NVLink: from NVML"), std::string::npos) << t->summary();
}

TEST(TopoNvml, FallsBackToDistancesWhenNvmlIsAbsent) {
  TSR_SKIP_WITHOUT_HWLOC();
  TopologyOptions o;
  o.xmlPath = test::topologyDataFile("nvlink-4gpu.xml");
  o.nvmlLibrary = "/nonexistent/libnvidia-ml.so.1";
  std::unique_ptr<Topology> t;
  ASSERT_EQ(Topology::load(o, &t), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(t->nvlinkSource(), NvlinkSource::kHwlocDistances);
  EXPECT_EQ(test::fullClass(*t, "12:00.0", "13:00.0"), PathClass::kNvl);
  std::string s = t->summary();
  EXPECT_NE(s.find("NVML unavailable"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera
