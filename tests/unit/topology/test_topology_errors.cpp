// Hostile topology files, a machine without PCI information, and the live machine.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/build_config.hpp"
#include "topo_test_util.hpp"

namespace tessera {
namespace {

// A scratch folder of this test process, removed with its files at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/tessera-topo-XXXXXX";
    const char* d = mkdtemp(tmpl);
    path_ = d != nullptr ? d : "";
  }
  ~ScratchDir() {
    for (const std::string& f : files_) std::remove(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  std::string write(const std::string& name, const std::string& content) {
    std::string p = track(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string track(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every rejection is tsrInvalidArgument with a sentence naming the file; nothing is returned.
void expectRejected(const std::string& path, const char* what) {
  std::unique_ptr<Topology> t;
  EXPECT_EQ(Topology::loadXml(path, &t), tsrInvalidArgument) << what;
  EXPECT_EQ(t, nullptr) << what;
  std::string why = lastErrorMessage();
  EXPECT_NE(why.find(path), std::string::npos) << what << ": " << why;
}

TEST(TopoHostileFile, IsRejectedWithASentence) {
  TSR_SKIP_WITHOUT_HWLOC();
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string good = readFile(test::topologyDataFile("two-socket-8gpu.xml"));
  ASSERT_GT(good.size(), 2000u);

  expectRejected(dir.path() + "/does-not-exist.xml", "nonexistent");
  expectRejected(dir.write("empty.xml", ""), "empty");
  expectRejected(dir.write("garbage.xml", "this is not XML at all <<< >>> &&&\n"), "garbage");
  expectRejected(dir.write("binary.xml", std::string("\0\xff\x13\x37\0\0\x7f", 7)), "binary");
  expectRejected(dir.write("truncated.xml", good.substr(0, good.size() / 2)), "truncated");
  expectRejected(dir.write("html.xml", "<?xml version=\"1.0\"?><html><body/></html>\n"),
                 "XML that is not a topology");
  expectRejected(dir.write("no-root.xml",
                           "<?xml version=\"1.0\"?><topology version=\"2.0\">"
                           "</topology>\n"),
                 "topology without objects");
  expectRejected(dir.path(), "a directory");
}

TEST(TopoHostileFile, FifoIsRejectedWithoutBlocking) {
  TSR_SKIP_WITHOUT_HWLOC();
  ScratchDir dir;
  std::string fifo = dir.track("topology.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // hwloc would block forever reading a FIFO nobody writes to.
  expectRejected(fifo, "a FIFO");
  EXPECT_NE(std::string(lastErrorMessage()).find("not a regular file"), std::string::npos);
}

TEST(TopoHostileFile, UnreadableFileIsRejected) {
  TSR_SKIP_WITHOUT_HWLOC();
  if (geteuid() == 0) GTEST_SKIP() << "running as root: file permissions do not apply";
  ScratchDir dir;
  std::string p = dir.write("secret.xml", readFile(test::topologyDataFile("no-pci.xml")));
  ASSERT_EQ(chmod(p.c_str(), 0), 0);
  expectRejected(p, "unreadable");
}

TEST(TopoHostileFile, ThroughTheEnvironmentNamesTheVariable) {
  TSR_SKIP_WITHOUT_HWLOC();
  ScratchDir dir;
  std::string p = dir.write("bad.xml", "<topology");
  test::ScopedEnv env("TESSERA_TOPO_FILE", p.c_str());
  std::unique_ptr<Topology> t;
  EXPECT_EQ(Topology::load(&t), tsrInvalidArgument);
  std::string why = lastErrorMessage();
  EXPECT_NE(why.find("TESSERA_TOPO_FILE"), std::string::npos) << why;
  EXPECT_NE(why.find(p), std::string::npos) << why;
}

TEST(TopoNoPci, DistinctGpusAreSys) {
  TSR_SKIP_WITHOUT_HWLOC();
  auto t = test::loadXmlOrFail(test::topologyDataFile("no-pci.xml"));
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->hasPciInfo());
  EXPECT_FALSE(t->pciUnavailableReason().empty());
  EXPECT_EQ(t->coreCount(), 2);
  EXPECT_TRUE(t->gpus().empty());
  // Without a PCI tree any well-formed bus id is accepted: all that is known is same or not.
  EXPECT_EQ(test::fullClass(*t, "0000:01:00.0", "0000:02:00.0"), PathClass::kSys);
  EXPECT_EQ(test::fullClass(*t, "0000:01:00.0", "01:00.0"), PathClass::kLoc);
  PathClass c;
  EXPECT_EQ(t->gpuPathClass("nonsense", "0000:01:00.0", &c), tsrInvalidArgument);
  std::string s = t->summary();
  EXPECT_NE(s.find("PCI: no information"), std::string::npos) << s;
  EXPECT_NE(s.find("GPUs: none"), std::string::npos) << s;
}

TEST(TopoLive, ThisMachineLoads) {
  test::ScopedEnv file("TESSERA_TOPO_FILE", nullptr);
  std::unique_ptr<Topology> t;
  ASSERT_EQ(Topology::load(&t), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(t->source(), "this machine");
  EXPECT_GT(t->puCount(), 0);
  if (TESSERA_HAVE_HWLOC) {
    EXPECT_GE(t->numaNodes().size(), 1u);
    EXPECT_GT(t->coreCount(), 0);
  }
  if (!t->hasPciInfo()) {
    EXPECT_FALSE(t->pciUnavailableReason().empty());
  }
  std::string s = t->summary();
  if (t->gpus().empty()) {
    EXPECT_NE(s.find("GPUs: none"), std::string::npos) << s;
  } else {
    for (const GpuInfo& g : t->gpus()) EXPECT_NE(s.find(g.busId), std::string::npos) << s;
  }
  // Where NVML is not used, the summary says why.
  if (t->nvlinkSource() != NvlinkSource::kNvml) {
    EXPECT_NE(s.find("NVML"), std::string::npos) << s;
  }
  std::printf("%s", s.c_str());
}

TEST(TopoLive, NvmlCanBeDisabled) {
  test::ScopedEnv file("TESSERA_TOPO_FILE", nullptr);
  test::ScopedEnv off("TESSERA_NVML_DISABLE", "1");
  std::unique_ptr<Topology> t;
  ASSERT_EQ(Topology::load(&t), tsrSuccess) << lastErrorMessage();
  EXPECT_NE(t->nvlinkSource(), NvlinkSource::kNvml);
  // A build configured without NVML says that instead.
  const char* why = TESSERA_NVML_ENABLED ? "TESSERA_NVML_DISABLE" : "TESSERA_WITH_NVML=OFF";
  EXPECT_NE(t->summary().find(why), std::string::npos) << t->summary();
}

TEST(TopoLive, InvalidNvmlSwitchIsAnError) {
  test::ScopedEnv off("TESSERA_NVML_DISABLE", "maybe");
  std::unique_ptr<Topology> t;
  EXPECT_EQ(Topology::load(&t), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("TESSERA_NVML_DISABLE"), std::string::npos);
}

TEST(TopoWithoutHwloc, XmlIsRefusedWithTheReason) {
  if (TESSERA_HAVE_HWLOC) GTEST_SKIP() << "this build has hwloc";
  std::unique_ptr<Topology> t;
  EXPECT_EQ(Topology::loadXml(test::topologyDataFile("no-pci.xml"), &t), tsrInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("hwloc"), std::string::npos);
  ASSERT_EQ(Topology::load(&t), tsrSuccess);
  EXPECT_FALSE(t->hasPciInfo());
  EXPECT_NE(t->summary().find("no hwloc"), std::string::npos) << t->summary();
  EXPECT_EQ(test::fullClass(*t, "0000:01:00.0", "0000:02:00.0"), PathClass::kSys);
}

}  // namespace
}  // namespace tessera
