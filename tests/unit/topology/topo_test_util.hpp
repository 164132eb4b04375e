// Shared helpers of the topology tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/build_config.hpp"
#include "core/status.hpp"
#include "support/harness.hpp"
#include "topology/topology.hpp"

#define TSR_SKIP_WITHOUT_HWLOC()                                                          \
  do {                                                                                    \
    if (!TESSERA_HAVE_HWLOC)                                                              \
      GTEST_SKIP() << "this build has no hwloc (TESSERA_HAVE_HWLOC=0): no PCI topology, " \
                      "no XML files";                                                     \
  } while (0)

namespace tessera::test {

inline std::string topologyDataFile(const char* name) {
  return testDataDir() + "/topologies/" + name;
}

// Loads an XML file or fails the calling test with the library's sentence.
inline std::unique_ptr<Topology> loadXmlOrFail(const std::string& path) {
  std::unique_ptr<Topology> t;
  Result r = Topology::loadXml(path, &t);
  EXPECT_EQ(r, tsrSuccess) << lastErrorMessage();
  return t;
}

inline PathClass pciClass(const Topology& t, const std::string& a, const std::string& b) {
  PathClass c = PathClass::kNet;
  EXPECT_EQ(t.gpuPciPathClass(a, b, &c), tsrSuccess) << lastErrorMessage();
  return c;
}

inline PathClass fullClass(const Topology& t, const std::string& a, const std::string& b) {
  PathClass c = PathClass::kNet;
  EXPECT_EQ(t.gpuPathClass(a, b, &c), tsrSuccess) << lastErrorMessage();
  return c;
}

}  // namespace tessera::test
