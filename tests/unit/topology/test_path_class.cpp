// Path class names (what TESSERA_P2P_LEVEL will parse) and PCI bus id spellings.
#include <gtest/gtest.h>

#include <string>

#include "core/status.hpp"
#include "topology/path_class.hpp"
#include "topology/pci_bus_id.hpp"

namespace tessera {
namespace {

TEST(TopoPathClass, NamesFollowNccl) {
  EXPECT_STREQ(pathClassName(PathClass::kLoc), "LOC");
  EXPECT_STREQ(pathClassName(PathClass::kNvl), "NVL");
  EXPECT_STREQ(pathClassName(PathClass::kPix), "PIX");
  EXPECT_STREQ(pathClassName(PathClass::kPxb), "PXB");
  EXPECT_STREQ(pathClassName(PathClass::kPhb), "PHB");
  EXPECT_STREQ(pathClassName(PathClass::kSys), "SYS");
  EXPECT_STREQ(pathClassName(PathClass::kNet), "NET");
}

TEST(TopoPathClass, OrderedFromNearToFar) {
  EXPECT_LT(PathClass::kLoc, PathClass::kNvl);
  EXPECT_LT(PathClass::kNvl, PathClass::kPix);
  EXPECT_LT(PathClass::kPix, PathClass::kPxb);
  EXPECT_LT(PathClass::kPxb, PathClass::kPhb);
  EXPECT_LT(PathClass::kPhb, PathClass::kSys);
  EXPECT_LT(PathClass::kSys, PathClass::kNet);
}

TEST(TopoPathClass, ParseIsCaseInsensitive) {
  const std::pair<const char*, PathClass> cases[] = {
      {"LOC", PathClass::kLoc}, {"nvl", PathClass::kNvl}, {"Pix", PathClass::kPix},
      {"pXb", PathClass::kPxb}, {"PHB", PathClass::kPhb}, {"sys", PathClass::kSys},
      {"NeT", PathClass::kNet}};
  for (const auto& [text, expected] : cases) {
    PathClass c = PathClass::kNet;
    ASSERT_EQ(parsePathClass(text, &c), tsrSuccess) << text;
    EXPECT_EQ(c, expected) << text;
  }
}

TEST(TopoPathClass, ParseRejectsOtherText) {
  for (const char* bad : {"", "NVLINK", "PIX ", "3", "P2P"}) {
    PathClass c = PathClass::kPix;
    EXPECT_EQ(parsePathClass(bad, &c), tsrInvalidArgument) << bad;
    EXPECT_EQ(c, PathClass::kPix) << "output written on failure for '" << bad << "'";
    std::string why = lastErrorMessage();
    EXPECT_NE(why.find(std::string("'") + bad + "'"), std::string::npos) << why;
    EXPECT_NE(why.find("PXB"), std::string::npos) << why;
  }
  PathClass c;
  EXPECT_EQ(parsePathClass(nullptr, &c), tsrInvalidArgument);
}

TEST(TopoPciBusId, SpellingsOfOneDeviceAreEqual) {
  PciBusId a, b, c, d;
  ASSERT_EQ(parsePciBusId("0000:3b:00.0", &a), tsrSuccess);
  ASSERT_EQ(parsePciBusId("0000:3B:00.0", &b), tsrSuccess);
  ASSERT_EQ(parsePciBusId("3b:00.0", &c), tsrSuccess);
  ASSERT_EQ(parsePciBusId(" 00000000:3B:00.0\n", &d), tsrSuccess);  // NVML's form
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(a, d);
  EXPECT_EQ(a.domain, 0u);
  EXPECT_EQ(a.bus, 0x3bu);
  EXPECT_EQ(a.device, 0u);
  EXPECT_EQ(a.function, 0u);
  EXPECT_EQ(formatPciBusId(d), "0000:3b:00.0");
}

TEST(TopoPciBusId, FieldsAndOrder) {
  PciBusId x, y;
  ASSERT_EQ(parsePciBusId("0001:0a:1f.7", &x), tsrSuccess);
  EXPECT_EQ(x.domain, 1u);
  EXPECT_EQ(x.bus, 0x0au);
  EXPECT_EQ(x.device, 0x1fu);
  EXPECT_EQ(x.function, 7u);
  EXPECT_EQ(formatPciBusId(x), "0001:0a:1f.7");
  ASSERT_EQ(parsePciBusId("0000:ff:00.0", &y), tsrSuccess);
  EXPECT_LT(y, x);  // domain first
}

TEST(TopoPciBusId, RejectsMalformed) {
  for (const char* bad : {"", "3b", "3b:00", "3b:00.8", "3b:20.0", "zz:00.0", "123:00.0",
                          "0:0:0:0.0", "3b:00.0x", "000000000:3b:00.0"}) {
    PciBusId id;
    EXPECT_EQ(parsePciBusId(bad, &id), tsrInvalidArgument) << bad;
    std::string why = lastErrorMessage();
    EXPECT_NE(why.find(std::string("'") + bad + "'"), std::string::npos) << why;
  }
  PciBusId id;
  EXPECT_FALSE(tryParsePciBusId(nullptr, &id));
}

}  // namespace
}  // namespace tessera
