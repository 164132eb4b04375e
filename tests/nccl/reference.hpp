// Serial references for the NCCL drop-in's tests, written against nccl.h alone: element
// conversions (NVIDIA's own for the half and fp8 types), deterministic inputs and the reduction
// of every rank's input in double (or in the type's own integer arithmetic), to compare with.
#pragma once

#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ncclref {

inline const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                        ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                        ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
inline const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

inline size_t elemSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

inline const char* typeName(ncclDataType_t t) {
  static const char* const names[] = {"int8",    "uint8",    "int32",   "uint32",
                                      "int64",   "uint64",   "float16", "float32",
                                      "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return names[static_cast<int>(t)];
}
inline const char* opName(ncclRedOp_t o) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return names[static_cast<int>(o)];
}

inline bool isInteger(ncclDataType_t t) { return t <= ncclUint64; }
inline bool isSigned(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

// Element i of buffer `p` as a double.
inline double load(ncclDataType_t t, const void* p, size_t i) {
  const char* b = static_cast<const char*>(p) + i * elemSize(t);
  switch (t) {
    case ncclInt8: {
      int8_t v;
      std::memcpy(&v, b, 1);
      return v;
    }
    case ncclUint8: {
      uint8_t v;
      std::memcpy(&v, b, 1);
      return v;
    }
    case ncclInt32: {
      int32_t v;
      std::memcpy(&v, b, 4);
      return v;
    }
    case ncclUint32: {
      uint32_t v;
      std::memcpy(&v, b, 4);
      return v;
    }
    case ncclInt64: {
      int64_t v;
      std::memcpy(&v, b, 8);
      return static_cast<double>(v);
    }
    case ncclUint64: {
      uint64_t v;
      std::memcpy(&v, b, 8);
      return static_cast<double>(v);
    }
    case ncclFloat16: {
      __half v;
      std::memcpy(&v, b, 2);
      return __half2float(v);
    }
    case ncclFloat32: {
      float v;
      std::memcpy(&v, b, 4);
      return v;
    }
    case ncclFloat64: {
      double v;
      std::memcpy(&v, b, 8);
      return v;
    }
    case ncclBfloat16: {
      __nv_bfloat16 v;
      std::memcpy(&v, b, 2);
      return __bfloat162float(v);
    }
    case ncclFloat8e4m3: {
      __nv_fp8_e4m3 v;
      std::memcpy(&v, b, 1);
      return static_cast<float>(v);
    }
    case ncclFloat8e5m2: {
      __nv_fp8_e5m2 v;
      std::memcpy(&v, b, 1);
      return static_cast<float>(v);
    }
    default: return NAN;
  }
}

inline void store(ncclDataType_t t, void* p, size_t i, double x) {
  char* b = static_cast<char*>(p) + i * elemSize(t);
  switch (t) {
    case ncclInt8: {
      int8_t v = static_cast<int8_t>(x);
      std::memcpy(b, &v, 1);
      break;
    }
    case ncclUint8: {
      uint8_t v = static_cast<uint8_t>(x);
      std::memcpy(b, &v, 1);
      break;
    }
    case ncclInt32: {
      int32_t v = static_cast<int32_t>(x);
      std::memcpy(b, &v, 4);
      break;
    }
    case ncclUint32: {
      uint32_t v = static_cast<uint32_t>(x);
      std::memcpy(b, &v, 4);
      break;
    }
    case ncclInt64: {
      int64_t v = static_cast<int64_t>(x);
      std::memcpy(b, &v, 8);
      break;
    }
    case ncclUint64: {
      uint64_t v = static_cast<uint64_t>(x);
      std::memcpy(b, &v, 8);
      break;
    }
    case ncclFloat16: {
      __half v = __float2half(static_cast<float>(x));
      std::memcpy(b, &v, 2);
      break;
    }
    case ncclFloat32: {
      float v = static_cast<float>(x);
      std::memcpy(b, &v, 4);
      break;
    }
    case ncclFloat64: std::memcpy(b, &x, 8); break;
    case ncclBfloat16: {
      __nv_bfloat16 v = __float2bfloat16(static_cast<float>(x));
      std::memcpy(b, &v, 2);
      break;
    }
    case ncclFloat8e4m3: {
      __nv_fp8_e4m3 v(static_cast<float>(x));
      std::memcpy(b, &v, 1);
      break;
    }
    case ncclFloat8e5m2: {
      __nv_fp8_e5m2 v(static_cast<float>(x));
      std::memcpy(b, &v, 1);
      break;
    }
    default: break;
  }
}

// Rank r's input element i: +-1 or +-2 (halved for the wider floating types), so that every
// sum and product over up to 4 ranks is exact in every type, fp8 included, and no integer wraps;
// no zeros, so products carry signal.
inline double inputValue(ncclDataType_t t, int rank, size_t i, uint64_t seed) {
  uint64_t h = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(rank) << 32) ^ i;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  int v = static_cast<int>(h % 2) + 1;
  if (isSigned(t) || !isInteger(t)) {
    if (h & 0x10) v = -v;
  }
  if (!isInteger(t) && t != ncclFloat8e4m3 && t != ncclFloat8e5m2) return v * 0.5;
  return v;
}

inline std::vector<char> makeInput(ncclDataType_t t, int rank, size_t count, uint64_t seed) {
  std::vector<char> buf(count * elemSize(t) + 1);
  for (size_t i = 0; i < count; ++i) store(t, buf.data(), i, inputValue(t, rank, i, seed));
  return buf;
}

// The reduction of value(0), ..., value(nranks - 1) by `op`, in double (avg: the sum divided,
// truncated for integer types).
template <class Value>
double reduceValues(ncclDataType_t t, ncclRedOp_t op, int nranks, Value value) {
  double acc = value(0);
  for (int r = 1; r < nranks; ++r) {
    double x = value(r);
    switch (op) {
      case ncclSum:
      case ncclAvg: acc += x; break;
      case ncclProd: acc *= x; break;
      case ncclMax: acc = std::max(acc, x); break;
      case ncclMin: acc = std::min(acc, x); break;
      default: break;
    }
  }
  if (op == ncclAvg) return isInteger(t) ? std::trunc(acc / nranks) : acc / nranks;
  return acc;
}

// The reduction of element i of every rank's input (inputValue) by `op`.
inline double reduceRef(ncclDataType_t t, ncclRedOp_t op, int nranks, size_t i, uint64_t seed) {
  return reduceValues(t, op, nranks, [&](int r) { return inputValue(t, r, i, seed); });
}

// How far a result may be from the reference: exact for integers (avg: one unit, since rounding
// of integer division differs between implementations), a few units in the last place of the
// type for floating point (avg divides after a sum in the type).
inline double tolerance(ncclDataType_t t, ncclRedOp_t op, double ref) {
  if (isInteger(t)) return op == ncclAvg ? 1.0 : 0.0;
  double eps = 0;
  switch (t) {
    case ncclFloat16: eps = 1.0 / 1024; break;
    case ncclBfloat16: eps = 1.0 / 128; break;
    case ncclFloat32: eps = 1e-6; break;
    case ncclFloat64: eps = 1e-13; break;
    case ncclFloat8e4m3: eps = 1.0 / 8; break;
    case ncclFloat8e5m2: eps = 1.0 / 4; break;
    default: break;
  }
  return 2 * eps * std::max(1.0, std::fabs(ref));
}

// "" when buffer `got` (count elements) matches `want(i)`, else the first mismatch in words.
template <class Want>
std::string compare(ncclDataType_t t, ncclRedOp_t op, const void* got, size_t count, Want want) {
  for (size_t i = 0; i < count; ++i) {
    double w = want(i), g = load(t, got, i);
    if (!(std::fabs(g - w) <= tolerance(t, op, w)))
      return std::string("element ") + std::to_string(i) + ": got " + std::to_string(g) +
             ", want " + std::to_string(w);
  }
  return "";
}

}  // namespace ncclref
