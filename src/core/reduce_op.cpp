#include "core/reduce_op.hpp"

#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "core/datatype.hpp"

namespace tessera {
namespace {

constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr const char* kBuiltinList = "tsrSum(0), tsrProd(1), tsrMax(2), tsrMin(3), tsrAvg(4)";

bool kindIsValid(RedKind kind) {
  return static_cast<unsigned>(kind) <= static_cast<unsigned>(RedKind::kPreMulSum);
}

// The checks every kernel shares: a known op, a valid datatype it may reduce, and pointers that
// are non-NULL whenever there is something to touch.
Result checkKernelArgs(const char* who, const RedOpDesc& op, tsrDataType_t dtype, size_t count,
                       std::initializer_list<const void*> ptrs) {
  if (!kindIsValid(op.kind)) {
    return TSR_FAIL(tsrInvalidArgument, "%s: invalid reduction kind %d", who,
                    static_cast<int>(op.kind));
  }
  TSR_CHECK(dtypeCheck(dtype, who));
  if (op.kind == RedKind::kPreMulSum && op.dtype != dtype) {
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: premulsum op was created for datatype %s and cannot reduce %s", who,
                    dtypeName(op.dtype), dtypeName(dtype));
  }
  if (count == 0) return tsrSuccess;
  for (const void* p : ptrs) {
    if (p == nullptr) {
      return TSR_FAIL(tsrInvalidArgument, "%s: NULL buffer for %zu elements of %s", who, count,
                      dtypeName(dtype));
    }
  }
  return tsrSuccess;
}

template <template <class> class Op, class T>
void reduceLoop(const T* a, const T* b, T* dst, size_t count) {
  // Read both operands before the store, so dst may be a or b.
  for (size_t i = 0; i < count; ++i) dst[i] = reduceElem<Op>(a[i], b[i]);
}

}  // namespace

const char* redKindName(RedKind kind) {
  switch (kind) {
    case RedKind::kSum: return "sum";
    case RedKind::kProd: return "prod";
    case RedKind::kMax: return "max";
    case RedKind::kMin: return "min";
    case RedKind::kAvg: return "avg";
    case RedKind::kPreMulSum: return "premulsum";
  }
  return "invalid";
}

Result redOpCheck(tsrRedOp_t op, const char* what) {
  const int v = static_cast<int>(op);
  if (v >= 0 && v < tsrNumOps) return tsrSuccess;
  return TSR_FAIL(tsrInvalidArgument,
                  "invalid reduction op %d for %s: expected %s or an op from "
                  "tsrRedOpCreatePreMulSum",
                  v, what != nullptr ? what : "(unnamed call)", kBuiltinList);
}

Result redOpBuiltin(tsrRedOp_t op, RedOpDesc* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "redOpBuiltin: output pointer is NULL");
  TSR_CHECK(redOpCheck(op, "redOpBuiltin"));
  *out = RedOpDesc{};
  switch (op) {
    case tsrSum: out->kind = RedKind::kSum; break;
    case tsrProd: out->kind = RedKind::kProd; break;
    case tsrMax: out->kind = RedKind::kMax; break;
    case tsrMin: out->kind = RedKind::kMin; break;
    default: out->kind = RedKind::kAvg; break;  // tsrAvg, the only value left after the check
  }
  return tsrSuccess;
}

Result makePreMulSum(tsrDataType_t dtype, const void* hostScalar, RedOpDesc* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "makePreMulSum: output pointer is NULL");
  TSR_CHECK(dtypeCheck(dtype, "tsrRedOpCreatePreMulSum"));
  if (hostScalar == nullptr) {
    return TSR_FAIL(tsrInvalidArgument, "tsrRedOpCreatePreMulSum: scalar pointer is NULL (%s)",
                    dtypeName(dtype));
  }
  RedOpDesc d;
  d.kind = RedKind::kPreMulSum;
  d.dtype = dtype;
  dtypeVisit(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, hostScalar, sizeof(T));  // the user's pointer may be unaligned
    using C = typename ElemTraits<T>::Compute;
    if constexpr (std::is_integral_v<C>) {
      // Sign- or zero-extend to 64 bits; the scalar's bits are then the wrapping multiplier.
      d.scalarInt = std::is_signed_v<C> ? static_cast<uint64_t>(static_cast<int64_t>(v))
                                        : static_cast<uint64_t>(v);
      d.scalarF = static_cast<double>(v);
    } else {
      d.scalarF = static_cast<double>(ElemTraits<T>::load(v));
    }
  });
  *out = d;
  return tsrSuccess;
}

Result reduceHost(const RedOpDesc& op, tsrDataType_t dtype, const void* a, const void* b, void* dst,
                  size_t count) {
  TSR_CHECK(checkKernelArgs("reduceHost", op, dtype, count, {a, b, dst}));
  if (count == 0) return tsrSuccess;
  dtypeVisit(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* pd = static_cast<T*>(dst);
    switch (op.kind) {
      case RedKind::kProd: reduceLoop<RedProd>(pa, pb, pd, count); break;
      case RedKind::kMax: reduceLoop<RedMax>(pa, pb, pd, count); break;
      case RedKind::kMin: reduceLoop<RedMin>(pa, pb, pd, count); break;
      case RedKind::kSum:
      case RedKind::kAvg:
      case RedKind::kPreMulSum: reduceLoop<RedSum>(pa, pb, pd, count); break;
    }
  });
  return tsrSuccess;
}

Result applyPreOp(const RedOpDesc& op, tsrDataType_t dtype, const void* src, void* dst,
                  size_t count) {
  TSR_CHECK(checkKernelArgs("applyPreOp", op, dtype, count, {src, dst}));
  if (count == 0) return tsrSuccess;
  if (op.kind != RedKind::kPreMulSum) {
    if (dst != src) std::memmove(dst, src, count * dtypeSize(dtype));
    return tsrSuccess;
  }
  dtypeVisit(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* ps = static_cast<const T*>(src);
    T* pd = static_cast<T*>(dst);
    const auto scalar = preMulScalar<T>(op);
    for (size_t i = 0; i < count; ++i) pd[i] = preMulElem(ps[i], scalar);
  });
  return tsrSuccess;
}

Result applyPostOp(const RedOpDesc& op, tsrDataType_t dtype, void* buf, size_t count, int nranks) {
  TSR_CHECK(checkKernelArgs("applyPostOp", op, dtype, count, {buf}));
  if (op.kind != RedKind::kAvg) return tsrSuccess;
  if (nranks < 1) {
    return TSR_FAIL(tsrInvalidArgument, "applyPostOp: avg over %d ranks (must be >= 1)", nranks);
  }
  if (count == 0) return tsrSuccess;
  dtypeVisit(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(buf);
    for (size_t i = 0; i < count; ++i) p[i] = avgElem(p[i], nranks);
  });
  return tsrSuccess;
}

Result reduceAllHost(const RedOpDesc& op, tsrDataType_t dtype, const void* const* inputs,
                     int ninputs, void* dst, size_t count) {
  if (ninputs < 1 || inputs == nullptr) {
    return TSR_FAIL(tsrInvalidArgument, "reduceAllHost: %d inputs (need at least one)", ninputs);
  }
  for (int r = 0; r < ninputs; ++r) {
    TSR_CHECK(checkKernelArgs("reduceAllHost", op, dtype, count, {inputs[r], dst}));
  }
  if (count == 0) return tsrSuccess;
  // Accumulate aside, so that dst may be any of the inputs.
  const size_t bytes = count * dtypeSize(dtype);
  std::vector<unsigned char> acc(bytes), term(bytes);
  TSR_CHECK(applyPreOp(op, dtype, inputs[0], acc.data(), count));
  for (int r = 1; r < ninputs; ++r) {
    TSR_CHECK(applyPreOp(op, dtype, inputs[r], term.data(), count));
    TSR_CHECK(reduceHost(op, dtype, acc.data(), term.data(), acc.data(), count));
  }
  TSR_CHECK(applyPostOp(op, dtype, acc.data(), count, ninputs));
  std::memcpy(dst, acc.data(), bytes);
  return tsrSuccess;
}

}  // namespace tessera
