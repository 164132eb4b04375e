// Reduction operations: the element functors every executor uses (host and device), the
// descriptor of an op (built-in or pre-multiplied sum), and host reference kernels.
//
// Semantics, the same on every executor:
//  - Integers: sum and prod wrap modulo 2^bits (computed in unsigned arithmetic, so signed
//    overflow is never undefined behaviour). min/max are the usual ones.
//  - float32 and float64 reduce in their own type.
//  - float16, bfloat16 and both FP8 formats reduce in float and round ONCE PER STEP: each step
//    loads both operands, converts them to float (exact), combines them in float, and rounds the
//    result to the narrow type (round to nearest even, E4M3 saturating; see float_convert.hpp).
//    A chain of steps therefore rounds after every step, exactly as when the partial results
//    travel between ranks in the narrow type. For sum, prod, the pre-multiply and the average's
//    division, float has at least 2p+2 bits for these formats' p, so the float result rounded
//    once equals the exactly computed result rounded once (no double-rounding error), barring
//    results that underflow float's own normal range (bfloat16 only).
//  - min/max on floats PROPAGATE NaN: if either operand is NaN the result is NaN (unlike fminf
//    and fmaxf, which drop it), because a NaN in a gradient must not vanish. Between -0 and +0,
//    min gives -0 and max gives +0, so both ops are commutative bit for bit.
//  - avg = sum over ranks, then divided by nranks at the end (applyPostOp). Integers: integer
//    division truncating toward zero of the wrapped sum (as NCCL). Floats: a division (not a
//    multiply by 1/n, which is inexact for n not a power of two), correctly rounded in the
//    compute type, then rounded once to the narrow type.
//  - premulsum(scalar) = sum over ranks of (scalar * input): each rank's input is multiplied by
//    the scalar (applyPreOp, one rounding for narrow types) before it is summed (as NCCL's
//    ncclRedOpCreatePreMulSum). Integer products wrap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/float_convert.hpp"
#include "core/host_device.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"

namespace tessera {

enum class RedKind : uint8_t { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };

// "sum", "prod", "max", "min", "avg", "premulsum".
const char* redKindName(RedKind kind);

// Everything an executor needs to run an op; a plain value, passed by value to kernels.
struct RedOpDesc {
  RedKind kind = RedKind::kSum;
  // kPreMulSum: the datatype the op was created for (it may only reduce that datatype).
  // Otherwise tsrNumTypes (any datatype).
  tsrDataType_t dtype = tsrNumTypes;
  // kPreMulSum scalar for floating types, exactly the value given (every narrow value, float and
  // double is a double).
  double scalarF = 1.0;
  // kPreMulSum scalar for integer types: the value sign-extended to 64 bits, as two's complement
  // bits (a wrapping product is the same for signed and unsigned operands).
  uint64_t scalarInt = 1;
};

// ---- Element functors over a compute type ------------------------------------------------------

namespace reddetail {
// Unsigned type at least as wide as `unsigned`, so 8-bit operands never promote to signed int.
template <class T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

TSR_INLINE float zeroSignOr(float a, float b) { return floatFromBits(floatBits(a) | floatBits(b)); }
TSR_INLINE double zeroSignOr(double a, double b) {
  return doubleFromBits(doubleBits(a) | doubleBits(b));
}
TSR_INLINE float zeroSignAnd(float a, float b) {
  return floatFromBits(floatBits(a) & floatBits(b));
}
TSR_INLINE double zeroSignAnd(double a, double b) {
  return doubleFromBits(doubleBits(a) & doubleBits(b));
}
}  // namespace reddetail

template <class C>
struct RedSum {
  TSR_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      using W = reddetail::WrapType<C>;
      return static_cast<C>(static_cast<W>(static_cast<W>(a) + static_cast<W>(b)));
    } else {
      return a + b;
    }
  }
};

template <class C>
struct RedProd {
  TSR_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      using W = reddetail::WrapType<C>;
      return static_cast<C>(static_cast<W>(static_cast<W>(a) * static_cast<W>(b)));
    } else {
      return a * b;
    }
  }
};

template <class C>
struct RedMin {
  TSR_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      return b < a ? b : a;
    } else {
      if (a != a) return a;  // NaN propagates
      if (b != b) return b;
      if (a < b) return a;
      if (b < a) return b;
      return reddetail::zeroSignOr(a, b);  // equal: only a zero's sign can differ; prefer -0
    }
  }
};

template <class C>
struct RedMax {
  TSR_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      return a < b ? b : a;
    } else {
      if (a != a) return a;
      if (b != b) return b;
      if (a < b) return b;
      if (b < a) return a;
      return reddetail::zeroSignAnd(a, b);  // prefer +0
    }
  }
};

// ---- Storage type <-> compute type -------------------------------------------------------------

// Compute type of a storage type, and the exact load / rounding store between them.
template <class T>
struct ElemTraits {
  using Compute = T;
  TSR_INLINE static T load(T x) { return x; }
  TSR_INLINE static T store(T x) { return x; }
};

template <class T>
struct NarrowFloatTraits {
  using Compute = float;
  TSR_INLINE static float load(T x) { return toFloat(x); }
  TSR_INLINE static T store(float x) { return T::fromFloat(x); }
};
template <>
struct ElemTraits<Float16> : NarrowFloatTraits<Float16> {};
template <>
struct ElemTraits<BFloat16> : NarrowFloatTraits<BFloat16> {};
template <>
struct ElemTraits<Float8E4M3> : NarrowFloatTraits<Float8E4M3> {};
template <>
struct ElemTraits<Float8E5M2> : NarrowFloatTraits<Float8E5M2> {};

// One reduction step on storage values: load, combine in the compute type, round once.
template <template <class> class Op, class T>
TSR_INLINE T reduceElem(T a, T b) {
  using Tr = ElemTraits<T>;
  return Tr::store(Op<typename Tr::Compute>{}(Tr::load(a), Tr::load(b)));
}

// The pre-multiply scalar of a kPreMulSum op in the compute type of T.
template <class T>
TSR_INLINE typename ElemTraits<T>::Compute preMulScalar(const RedOpDesc& op) {
  using C = typename ElemTraits<T>::Compute;
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(op.scalarInt);  // modular narrowing: the low bits of the scalar
  } else {
    return static_cast<C>(op.scalarF);  // exact: the scalar was given in T
  }
}

// scalar * x with one rounding (narrow types) or wrapping (integers).
template <class T>
TSR_INLINE T preMulElem(T x, typename ElemTraits<T>::Compute scalar) {
  using Tr = ElemTraits<T>;
  return Tr::store(RedProd<typename Tr::Compute>{}(Tr::load(x), scalar));
}

// The average's final step: x / nranks (nranks >= 1).
template <class T>
TSR_INLINE T avgElem(T x, int nranks) {
  using Tr = ElemTraits<T>;
  using C = typename Tr::Compute;
  if constexpr (std::is_integral_v<C>) {
    // In 64 bits: C(nranks) could overflow an 8-bit type. C++ division truncates toward zero,
    // and |x / n| <= |x| fits back into C.
    if constexpr (std::is_signed_v<C>) {
      return static_cast<C>(static_cast<int64_t>(x) / static_cast<int64_t>(nranks));
    } else {
      return static_cast<C>(static_cast<uint64_t>(x) / static_cast<uint64_t>(nranks));
    }
  } else {
    return Tr::store(Tr::load(x) / static_cast<C>(nranks));
  }
}

// ---- Descriptors and validation (host) ---------------------------------------------------------

// tsrInvalidArgument "invalid reduction op 9 for <what>: ..." unless `op` is a built-in op
// (tsrSum, tsrProd, tsrMax, tsrMin, tsrAvg). Handles from tsrRedOpCreatePreMulSum are resolved
// by the communicator before this check.
Result redOpCheck(tsrRedOp_t op, const char* what);

// The descriptor of a built-in op (tsrInvalidArgument, as redOpCheck, for any other value).
Result redOpBuiltin(tsrRedOp_t op, RedOpDesc* out);

// A premulsum op for `dtype`, its scalar read now from host memory as one element of `dtype`.
Result makePreMulSum(tsrDataType_t dtype, const void* hostScalar, RedOpDesc* out);

// ---- Host reference kernels --------------------------------------------------------------------
// Plain loops, used by the host executor and as references in tests. Buffers hold `count`
// elements of `dtype`, aligned for it; a destination may be the very same buffer as a source
// (in place) but must not partially overlap one. count == 0 accepts NULL pointers.

// dst[i] = a[i] op b[i] (sum for kAvg and kPreMulSum: their extra steps are the pre/post ops).
Result reduceHost(const RedOpDesc& op, tsrDataType_t dtype, const void* a, const void* b, void* dst,
                  size_t count);

// What each rank does to its own input before it is reduced: dst = scalar * src for
// kPreMulSum, a copy (nothing when dst == src) otherwise.
Result applyPreOp(const RedOpDesc& op, tsrDataType_t dtype, const void* src, void* dst,
                  size_t count);

// What is done to the reduced result: buf /= nranks for kAvg, nothing otherwise.
Result applyPostOp(const RedOpDesc& op, tsrDataType_t dtype, void* buf, size_t count, int nranks);

// The result of reducing `ninputs` buffers in the order given: pre-op on each input, then left
// to right reduction steps, then the post-op with nranks = ninputs. dst may be one of the inputs.
Result reduceAllHost(const RedOpDesc& op, tsrDataType_t dtype, const void* const* inputs,
                     int ninputs, void* dst, size_t count);

}  // namespace tessera
