#include <gtest/gtest.h>

#include <string>

#include "core/datatype.hpp"
#include "core/status.hpp"

namespace tessera {
namespace {

struct Expect {
  tsrDataType_t dtype;
  const char* name;
  size_t size;
  bool isFloat;
};

// Written from the public header's list, independently of datatype.cpp's table.
const Expect kExpected[] = {
    {tsrInt8, "int8", 1, false},
    {tsrUint8, "uint8", 1, false},
    {tsrInt32, "int32", 4, false},
    {tsrUint32, "uint32", 4, false},
    {tsrInt64, "int64", 8, false},
    {tsrUint64, "uint64", 8, false},
    {tsrFloat16, "float16", 2, true},
    {tsrBfloat16, "bfloat16", 2, true},
    {tsrFloat32, "float32", 4, true},
    {tsrFloat64, "float64", 8, true},
    {tsrFloat8e4m3, "float8e4m3", 1, true},
    {tsrFloat8e5m2, "float8e5m2", 1, true},
};

TEST(Datatype, NamesSizesKinds) {
  static_assert(sizeof(kExpected) / sizeof(kExpected[0]) == tsrNumTypes);
  for (const Expect& e : kExpected) {
    EXPECT_TRUE(dtypeIsValid(e.dtype)) << e.name;
    EXPECT_STREQ(dtypeName(e.dtype), e.name);
    EXPECT_EQ(dtypeSize(e.dtype), e.size) << e.name;
    EXPECT_EQ(dtypeIsFloat(e.dtype), e.isFloat) << e.name;
    EXPECT_EQ(dtypeCheck(e.dtype, "test"), tsrSuccess) << e.name;
  }
  // The storage types dtypeVisit hands out have the datatype's size.
  for (const Expect& e : kExpected) {
    EXPECT_EQ(dtypeVisit(e.dtype, [](auto tag) { return sizeof(tag); }), e.size) << e.name;
  }
}

TEST(Datatype, InvalidValues) {
  for (int v : {-1, static_cast<int>(tsrNumTypes), 42, 1 << 30}) {
    EXPECT_FALSE(dtypeIsValid(v)) << v;
    const auto d = static_cast<tsrDataType_t>(v);
    EXPECT_EQ(dtypeSize(d), 0u);
    EXPECT_STREQ(dtypeName(d), "invalid");
    EXPECT_FALSE(dtypeIsFloat(d));
    EXPECT_EQ(dtypeVisit(d, [](auto tag) { return sizeof(tag); }), 0u);
  }
  clearLastError();
  EXPECT_EQ(dtypeCheck(static_cast<tsrDataType_t>(42), "tsrAllReduce"), tsrInvalidArgument);
  const std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("invalid datatype 42 for tsrAllReduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float8e5m2"), std::string::npos) << msg;
}

TEST(Datatype, ParseCanonicalNamesAndAliases) {
  for (const Expect& e : kExpected) {
    tsrDataType_t d = tsrNumTypes;
    ASSERT_EQ(dtypeParse(e.name, &d), tsrSuccess) << e.name;
    EXPECT_EQ(d, e.dtype) << e.name;
  }
  const struct {
    const char* alias;
    tsrDataType_t dtype;
  } aliases[] = {
      {"char", tsrInt8},          {"int", tsrInt32},          {"half", tsrFloat16},
      {"fp16", tsrFloat16},       {"HALF", tsrFloat16},       {"bf16", tsrBfloat16},
      {"float", tsrFloat32},      {"fp32", tsrFloat32},       {"double", tsrFloat64},
      {"fp64", tsrFloat64},       {"fp8e4m3", tsrFloat8e4m3}, {"e4m3", tsrFloat8e4m3},
      {"fp8e5m2", tsrFloat8e5m2}, {"E5M2", tsrFloat8e5m2},    {"Float32", tsrFloat32},
  };
  for (const auto& a : aliases) {
    tsrDataType_t d = tsrNumTypes;
    ASSERT_EQ(dtypeParse(a.alias, &d), tsrSuccess) << a.alias;
    EXPECT_EQ(d, a.dtype) << a.alias;
  }
}

TEST(Datatype, ParseRejectsBadNames) {
  for (const char* bad : {"", "floaty", "int16", "fp8", "float 32", "e4m3 "}) {
    tsrDataType_t d = tsrFloat64;
    clearLastError();
    EXPECT_EQ(dtypeParse(bad, &d), tsrInvalidArgument) << "'" << bad << "'";
    EXPECT_EQ(d, tsrFloat64) << "output written on failure for '" << bad << "'";
    const std::string msg = lastErrorMessage();
    EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
  }
  tsrDataType_t d;
  EXPECT_EQ(dtypeParse(nullptr, &d), tsrInvalidArgument);
  EXPECT_EQ(dtypeParse("float", nullptr), tsrInvalidArgument);
}

}  // namespace
}  // namespace tessera
