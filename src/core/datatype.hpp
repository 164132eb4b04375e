// Datatypes of the public API (tsrDataType_t): sizes, names, parsing, validation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/float_convert.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"

namespace tessera {

// Bytes per element of a tsrDataType_t value, 0 for an invalid one. TSR_INLINE: the device
// executor's kernels read the datatype as a byte of a work item.
TSR_INLINE uint64_t dtypeBytes(int dtype) {
  switch (dtype) {
    case tsrInt8:
    case tsrUint8:
    case tsrFloat8e4m3:
    case tsrFloat8e5m2: return 1;
    case tsrFloat16:
    case tsrBfloat16: return 2;
    case tsrInt32:
    case tsrUint32:
    case tsrFloat32: return 4;
    case tsrInt64:
    case tsrUint64:
    case tsrFloat64: return 8;
    default: return 0;
  }
}

// True for 0 <= value < tsrNumTypes. Takes an int because API callers may pass any value.
bool dtypeIsValid(int value);

// Bytes per element; 0 for an invalid value.
size_t dtypeSize(tsrDataType_t dtype);

// The canonical name: int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64
// float8e4m3 float8e5m2; "invalid" for an invalid value.
const char* dtypeName(tsrDataType_t dtype);

// True for the floating-point types (float16, bfloat16, float32, float64 and both FP8).
bool dtypeIsFloat(tsrDataType_t dtype);

// Parses a canonical name or a common alias (case-insensitive): char, i8, u8, int, i32, u32, i64,
// u64, half, fp16, f16, bf16, float, fp32, f32, double, fp64, f64, fp8e4m3, e4m3, e4m3fn,
// fp8e5m2, e5m2. tsrInvalidArgument with a sentence listing the valid names otherwise.
Result dtypeParse(const char* name, tsrDataType_t* out);

// tsrInvalidArgument "invalid datatype 42 for <what>: ..." when `dtype` is out of range; used to
// validate API arguments (what: e.g. "tsrAllReduce").
Result dtypeCheck(tsrDataType_t dtype, const char* what);

// Calls fn(T{}) with the element storage type T of `dtype` (int8_t ... double, Float16,
// BFloat16, Float8E4M3, Float8E5M2) and returns its result; for an invalid dtype returns a
// value-initialized result without calling fn (check the dtype first to report it).
template <class Fn>
auto dtypeVisit(tsrDataType_t dtype, Fn&& fn) -> decltype(fn(int8_t{})) {
  switch (dtype) {
    case tsrInt8: return fn(int8_t{});
    case tsrUint8: return fn(uint8_t{});
    case tsrInt32: return fn(int32_t{});
    case tsrUint32: return fn(uint32_t{});
    case tsrInt64: return fn(int64_t{});
    case tsrUint64: return fn(uint64_t{});
    case tsrFloat16: return fn(Float16{});
    case tsrFloat32: return fn(float{});
    case tsrFloat64: return fn(double{});
    case tsrBfloat16: return fn(BFloat16{});
    case tsrFloat8e4m3: return fn(Float8E4M3{});
    case tsrFloat8e5m2: return fn(Float8E5M2{});
    default: break;
  }
  return decltype(fn(int8_t{}))();
}

}  // namespace tessera
