#include "coll_perf_data.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/datatype.hpp"

namespace tessera::perf {
namespace {

// Element conversions: every value used here is a small integer, exact in each type, so the
// narrow types' rounding never enters the inputs.
template <class T>
struct Conv {
  static T from(double v) { return static_cast<T>(v); }
  static double to(T x) { return static_cast<double>(x); }
  static constexpr bool kIsSigned = std::is_signed_v<T>;
  static constexpr bool kIsFloat = std::is_floating_point_v<T>;
  // Unit roundoff (0: integers, exact).
  static constexpr double kUnit = std::is_same_v<T, float>    ? 0x1p-24
                                  : std::is_same_v<T, double> ? 0x1p-53
                                                              : 0;
};
template <class T>
struct NarrowConv {
  static T from(double v) { return T::fromFloat(static_cast<float>(v)); }
  static double to(T x) { return static_cast<double>(toFloat(x)); }
  static constexpr bool kIsSigned = true;
  static constexpr bool kIsFloat = true;
};
template <>
struct Conv<Float16> : NarrowConv<Float16> {
  static constexpr double kUnit = 0x1p-11;
};
template <>
struct Conv<BFloat16> : NarrowConv<BFloat16> {
  static constexpr double kUnit = 0x1p-8;
};
template <>
struct Conv<Float8E4M3> : NarrowConv<Float8E4M3> {
  static constexpr double kUnit = 0x1p-4;
};
template <>
struct Conv<Float8E5M2> : NarrowConv<Float8E5M2> {
  static constexpr double kUnit = 0x1p-3;
};

enum class Pattern { kSum, kProd, kMinMax, kMove };

Pattern patternOf(OpKind op, bool reduces) {
  if (!reduces) return Pattern::kMove;
  switch (op) {
    case OpKind::kProd: return Pattern::kProd;
    case OpKind::kMin:
    case OpKind::kMax: return Pattern::kMinMax;
    default: return Pattern::kSum;
  }
}

// The documented input of rank r at element i (coll_perf_data.hpp).
double inputValue(Pattern p, bool isSigned, int rank, size_t index) {
  auto r = static_cast<uint64_t>(rank);
  auto i = static_cast<uint64_t>(index);
  switch (p) {
    case Pattern::kSum:
      return isSigned ? static_cast<double>((3 * r + i) % 5) - 2
                      : static_cast<double>((3 * r + i) % 3);
    case Pattern::kProd: {
      double m = (r + i) % 4 == 0 ? 2 : 1;
      return isSigned && (7 * r + i) % 3 == 0 ? -m : m;
    }
    case Pattern::kMinMax: {
      auto v = static_cast<double>((7 * r + 3 * i) % 9);
      return isSigned ? v - 4 : v;
    }
    case Pattern::kMove: {
      auto v = static_cast<double>((5 * r + 3 * i) % 17);
      return isSigned ? v - 8 : v;
    }
  }
  return 0;
}

// Every reducing pattern repeats in the index with a period dividing this one, so the expected
// reduction of element i is that of element i % kPeriod.
constexpr size_t kPeriod = 60;

double reduceOverRanks(OpKind op, Pattern p, bool isSigned, bool isFloat, int nranks,
                       size_t index) {
  double acc = inputValue(p, isSigned, 0, index);
  if (op == OpKind::kPreMulSum) acc *= 2;
  for (int q = 1; q < nranks; ++q) {
    double v = inputValue(p, isSigned, q, index);
    switch (op) {
      case OpKind::kProd: acc *= v; break;
      case OpKind::kMin: acc = std::min(acc, v); break;
      case OpKind::kMax: acc = std::max(acc, v); break;
      case OpKind::kPreMulSum: acc += 2 * v; break;
      default: acc += v; break;
    }
  }
  if (op == OpKind::kAvg) acc = isFloat ? acc / nranks : std::trunc(acc / nranks);
  return acc;
}

template <class T>
int64_t countWrongTyped(const T* out, size_t outCount, const CollHooks& hooks, const CollArgs& args,
                        OpKind op) {
  using C = Conv<T>;
  Pattern p = patternOf(op, hooks.reduces);
  std::array<double, kPeriod> reduced{};
  double tol = 0;
  if (hooks.reduces) {
    for (size_t i = 0; i < kPeriod; ++i)
      reduced[i] = reduceOverRanks(op, p, C::kIsSigned, C::kIsFloat, args.nranks, i);
    if (p == Pattern::kSum && C::kIsFloat) {
      // Each step of a sum may round once, by at most u times its partial result, and the
      // average's division once more.
      double largestPartial = 2.0 * args.nranks * (op == OpKind::kPreMulSum ? 2 : 1);
      tol = C::kUnit * (args.nranks * largestPartial + largestPartial);
    }
  }
  int64_t wrong = 0;
  for (size_t j = 0; j < outCount; ++j) {
    Source s = hooks.source(args, j);
    double expect;
    if (s.kind == Source::kUnwritten) continue;
    if (s.kind == Source::kReduce)
      expect = reduced[s.index % kPeriod];
    else
      expect = inputValue(p, C::kIsSigned, s.fromRank, s.index);
    double got = C::to(out[j]);
    if (!(std::fabs(got - expect) <= tol)) ++wrong;  // NaN counts as wrong
  }
  return wrong;
}

}  // namespace

void fillInput(void* dst, size_t count, tsrDataType_t type, OpKind op, bool reduces, int rank) {
  Pattern p = patternOf(op, reduces);
  dtypeVisit(type, [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst);
    for (size_t i = 0; i < count; ++i)
      d[i] = Conv<T>::from(inputValue(p, Conv<T>::kIsSigned, rank, i));
    return 0;
  });
}

void fillValue(void* dst, size_t count, tsrDataType_t type, double value) {
  dtypeVisit(type, [&](auto tag) {
    using T = decltype(tag);
    T v = Conv<T>::from(value);
    std::fill_n(static_cast<T*>(dst), count, v);
    return 0;
  });
}

int64_t countWrong(const void* out, size_t outCount, const CollHooks& hooks, const CollArgs& args,
                   OpKind op) {
  return dtypeVisit(args.dtype, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    return countWrongTyped(static_cast<const T*>(out), outCount, hooks, args, op);
  });
}

void preMulScalar(tsrDataType_t type, void* out) {
  dtypeVisit(type, [&](auto tag) {
    using T = decltype(tag);
    T v = Conv<T>::from(2);
    std::memcpy(out, &v, sizeof v);
    return 0;
  });
}

}  // namespace tessera::perf
