// Element-level reduce, copy and post-op kernels of the executors, written once for the host and
// the device (DESIGN.md, "One algorithm, two executors"). Every function is TSR_INLINE and uses no
// library call, so a CUDA kernel instantiates the same templates that the host executor and the
// tests run. The semantics are exactly those of core/reduce_op.hpp: a reduce over sources
// s0, s1, ... is ((pre(s0) op pre(s1)) op pre(s2)) ..., one reduction step (with its one rounding
// for narrow floats) per source, where pre() is the premulsum scalar multiply on the sources that
// ask for it and the identity otherwise. The post-op (avg) is a separate pass.
//
// A range kernel visits elements begin, begin + stride, ... < end: the host passes (0, count, 1),
// a CUDA kernel (first thread index, count, total threads), so the grid strides through the span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/host_device.hpp"
#include "core/reduce_op.hpp"

namespace tessera {

// A reduction step as a type, so that a runtime RedKind can select a template instantiation.
template <template <class> class Op>
struct RedStep {
  template <class T>
  TSR_INLINE static T apply(T a, T b) {
    return reduceElem<Op>(a, b);
  }
};
using RedStepSum = RedStep<RedSum>;
using RedStepProd = RedStep<RedProd>;
using RedStepMax = RedStep<RedMax>;
using RedStepMin = RedStep<RedMin>;

// Calls fn(RedStep<...>{}) for the reduction step of `kind` and returns its result. kAvg and
// kPreMulSum reduce as sum (their extra work is the pre- and post-op).
template <class Fn>
TSR_INLINE auto redStepVisit(RedKind kind, Fn&& fn) -> decltype(fn(RedStepSum{})) {
  switch (kind) {
    case RedKind::kProd: return fn(RedStepProd{});
    case RedKind::kMax: return fn(RedStepMax{});
    case RedKind::kMin: return fn(RedStepMin{});
    default: return fn(RedStepSum{});
  }
}

// The compute type of storage type T (float for the narrow floats).
template <class T>
using RedCompute = typename ElemTraits<T>::Compute;

// The premulsum multiply scalar * x, rounded once to T (wrapping for integers). In device code
// float and double use the _rn intrinsics: nvcc contracts a plain multiply followed by the sum's
// add into one FMA by default, which would skip the rounding the host performs.
template <class T>
TSR_INLINE T preOpElem(T x, RedCompute<T> scalar) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) {
    return __fmul_rn(x, scalar);
  } else if constexpr (std::is_same_v<T, double>) {
    return __dmul_rn(x, scalar);
  } else {
    return preMulElem(x, scalar);
  }
#else
  return preMulElem(x, scalar);
#endif
}

// One reduce or copy on spans of `count` elements of T (count is the range kernels' `end`).
//  - srcs[0 .. nsrcs): nsrcs >= 1 sources (local or mapped peer memory).
//  - preOp: nullptr (no source takes the pre-op), or per source 1 = multiply this source's values
//    by `scalar` as they are loaded. The caller passes nullptr unless the op is kPreMulSum.
//  - dst: the result; it may be the very same pointer as a source (each element's sources are
//    read before its result is stored), but must not partially overlap one.
//  - dst2: nullptr, or a second destination receiving the same values.
template <class T>
struct ElemReduceArgs {
  const T* const* srcs = nullptr;
  int nsrcs = 0;
  const uint8_t* preOp = nullptr;
  RedCompute<T> scalar{};
  T* dst = nullptr;
  T* dst2 = nullptr;
};

// Source s's element i, with its pre-op when it has one.
template <class T>
TSR_INLINE T loadSource(const ElemReduceArgs<T>& a, int s, size_t i) {
  const T x = a.srcs[s][i];
  if (a.preOp != nullptr && a.preOp[s] != 0) return preOpElem(x, a.scalar);
  return x;
}

// The reduced value of element i: sources combined left to right.
template <class Step, class T>
TSR_INLINE T reduceAt(const ElemReduceArgs<T>& a, size_t i) {
  T acc = loadSource(a, 0, i);
  for (int s = 1; s < a.nsrcs; ++s) acc = Step::apply(acc, loadSource(a, s, i));
  return acc;
}

template <class Step, class T>
TSR_INLINE void reduceRange(const ElemReduceArgs<T>& a, size_t begin, size_t end, size_t stride) {
  for (size_t i = begin; i < end; i += stride) {
    const T v = reduceAt<Step>(a, i);
    a.dst[i] = v;
    if (a.dst2 != nullptr) a.dst2[i] = v;
  }
}

// dst (and dst2) = pre(src): the one-source reduce, with or without the pre-op.
template <class T>
TSR_INLINE void copyRange(T* dst, T* dst2, const T* src, bool pre, RedCompute<T> scalar,
                          size_t begin, size_t end, size_t stride) {
  for (size_t i = begin; i < end; i += stride) {
    const T v = pre ? preOpElem(src[i], scalar) : src[i];
    dst[i] = v;
    if (dst2 != nullptr) dst2[i] = v;
  }
}

// The avg post-op in place: buf[i] = buf[i] / nranks (nranks >= 1).
template <class T>
TSR_INLINE void avgRange(T* buf, int nranks, size_t begin, size_t end, size_t stride) {
  for (size_t i = begin; i < end; i += stride) buf[i] = avgElem(buf[i], nranks);
}

}  // namespace tessera
