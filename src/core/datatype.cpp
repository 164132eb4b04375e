#include "core/datatype.hpp"

#include <strings.h>

#include <string>

namespace tessera {
namespace {

constexpr Subsys kLogSubsys = Subsys::kColl;

struct TypeInfo {
  const char* name;
  bool isFloat;
};

// Indexed by tsrDataType_t value; sizes are dtypeBytes (datatype.hpp).
constexpr TypeInfo kTypes[tsrNumTypes] = {
    {"int8", false},   {"uint8", false},   {"int32", false},     {"uint32", false},
    {"int64", false},  {"uint64", false},  {"float16", true},    {"float32", true},
    {"float64", true}, {"bfloat16", true}, {"float8e4m3", true}, {"float8e5m2", true},
};

struct Alias {
  const char* name;
  tsrDataType_t dtype;
};

constexpr Alias kAliases[] = {
    {"char", tsrInt8},          {"i8", tsrInt8},         {"u8", tsrUint8},
    {"int", tsrInt32},          {"i32", tsrInt32},       {"u32", tsrUint32},
    {"i64", tsrInt64},          {"u64", tsrUint64},      {"half", tsrFloat16},
    {"fp16", tsrFloat16},       {"f16", tsrFloat16},     {"bf16", tsrBfloat16},
    {"float", tsrFloat32},      {"fp32", tsrFloat32},    {"f32", tsrFloat32},
    {"double", tsrFloat64},     {"fp64", tsrFloat64},    {"f64", tsrFloat64},
    {"fp8e4m3", tsrFloat8e4m3}, {"e4m3", tsrFloat8e4m3}, {"e4m3fn", tsrFloat8e4m3},
    {"fp8e5m2", tsrFloat8e5m2}, {"e5m2", tsrFloat8e5m2},
};

std::string validNames() {
  std::string s;
  for (int i = 0; i < tsrNumTypes; ++i) {
    if (i > 0) s += ", ";
    s += kTypes[i].name;
  }
  return s;
}

}  // namespace

bool dtypeIsValid(int value) { return value >= 0 && value < tsrNumTypes; }

size_t dtypeSize(tsrDataType_t dtype) { return static_cast<size_t>(dtypeBytes(dtype)); }

const char* dtypeName(tsrDataType_t dtype) {
  return dtypeIsValid(dtype) ? kTypes[static_cast<int>(dtype)].name : "invalid";
}

bool dtypeIsFloat(tsrDataType_t dtype) {
  return dtypeIsValid(dtype) && kTypes[static_cast<int>(dtype)].isFloat;
}

Result dtypeParse(const char* name, tsrDataType_t* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "dtypeParse: output pointer is NULL");
  if (name == nullptr) {
    return TSR_FAIL(tsrInvalidArgument, "datatype name is NULL; valid names are %s",
                    validNames().c_str());
  }
  for (int i = 0; i < tsrNumTypes; ++i) {
    if (strcasecmp(name, kTypes[i].name) == 0) {
      *out = static_cast<tsrDataType_t>(i);
      return tsrSuccess;
    }
  }
  for (const Alias& a : kAliases) {
    if (strcasecmp(name, a.name) == 0) {
      *out = a.dtype;
      return tsrSuccess;
    }
  }
  return TSR_FAIL(tsrInvalidArgument,
                  "unknown datatype name '%s'; valid names are %s (or aliases such as half, "
                  "bf16, float, double, int, fp8e4m3, e5m2)",
                  name, validNames().c_str());
}

Result dtypeCheck(tsrDataType_t dtype, const char* what) {
  if (dtypeIsValid(dtype)) return tsrSuccess;
  return TSR_FAIL(tsrInvalidArgument, "invalid datatype %d for %s: expected 0..%d (%s)",
                  static_cast<int>(dtype), what != nullptr ? what : "(unnamed call)",
                  tsrNumTypes - 1, validNames().c_str());
}

}  // namespace tessera
