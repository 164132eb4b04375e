// The data work of the device backend's copy and reduce ops, and of the avg post-op: one CTA
// (Group) splits a piece over its threads. __host__ __device__, with the element functions of
// reduce_kernels.hpp, so the GPU's results equal the host executor's bit for bit.
#pragma once

#include <stdint.h>
#include <string.h>

#include "collectives/exec/device/group.hpp"
#include "collectives/exec/ops.hpp"
#include "collectives/exec/reduce_kernels.hpp"
#include "core/datatype.hpp"

namespace tessera::exec {
namespace devdetail {

// The premulsum scalar from WorkItem::scalarBits (little end first), as a bit copy.
template <class T>
TSR_INLINE RedCompute<T> scalarOf(uint64_t bits) {
  RedCompute<T> c;
  unsigned char b[sizeof(c)];
  for (unsigned i = 0; i < sizeof(c); ++i) b[i] = static_cast<unsigned char>(bits >> (8 * i));
  memcpy(&c, b, sizeof(c));
  return c;
}

// One combine: dst (and dst2) <- srcs[0] op ... op srcs[nsrcs - 1]; bit s of `pre`: source s
// takes the premulsum pre-op.
struct Piece {
  const void* const* srcs;
  int nsrcs;
  uint64_t pre;
  void* dst;
  void* dst2;
  uint64_t n;
};

// reduceAt of reduce_kernels.hpp with the pre-op flags as a bit mask.
template <class Step, class T>
TSR_INLINE T elemAt(const Piece& p, RedCompute<T> scalar, uint64_t i) {
  T acc = static_cast<const T*>(p.srcs[0])[i];
  if (p.pre & 1) acc = preOpElem(acc, scalar);
  for (int s = 1; s < p.nsrcs; ++s) {
    T x = static_cast<const T*>(p.srcs[s])[i];
    if ((p.pre >> s) & 1) x = preOpElem(x, scalar);
    acc = Step::apply(acc, x);
  }
  return acc;
}

template <class Step, class T>
TSR_INLINE void reduceElems(const Piece& p, RedCompute<T> scalar, uint64_t begin, uint64_t end,
                            uint64_t stride) {
  T* d = static_cast<T*>(p.dst);
  T* d2 = static_cast<T*>(p.dst2);
  for (uint64_t i = begin; i < end; i += stride) {
    const T v = elemAt<Step, T>(p, scalar, i);
    d[i] = v;
    if (d2 != nullptr) d2[i] = v;
  }
}

#if defined(__CUDA_ARCH__)
// 16-byte words of a piece whose pointers are all 16-byte aligned, each thread whole words.
template <class Step, class T>
__device__ void reduceWords(const Piece& p, RedCompute<T> scalar, uint64_t words, uint32_t tid,
                            uint32_t nthreads) {
  constexpr int kPer = static_cast<int>(16 / sizeof(T));
  for (uint64_t w = tid; w < words; w += nthreads) {
    T acc[kPer];
    uint4 u = __ldcg(static_cast<const uint4*>(p.srcs[0]) + w);
    memcpy(acc, &u, 16);
    if (p.pre & 1) {
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] = preOpElem(acc[j], scalar);
    }
    for (int s = 1; s < p.nsrcs; ++s) {
      T x[kPer];
      u = __ldcg(static_cast<const uint4*>(p.srcs[s]) + w);
      memcpy(x, &u, 16);
      const bool pre = (p.pre >> s) & 1;
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        acc[j] = Step::apply(acc[j], pre ? preOpElem(x[j], scalar) : x[j]);
    }
    memcpy(&u, acc, 16);
    static_cast<uint4*>(p.dst)[w] = u;
    if (p.dst2 != nullptr) static_cast<uint4*>(p.dst2)[w] = u;
  }
}
#endif

template <class Step, class T, class Group>
TSR_INLINE void reducePiece(const Group& g, const Piece& p, RedCompute<T> scalar) {
#if defined(__CUDA_ARCH__)
  constexpr uint64_t kPer = 16 / sizeof(T);
  bool vec = aligned16(p.dst) && aligned16(p.dst2);
  for (int s = 0; s < p.nsrcs && vec; ++s) vec = aligned16(p.srcs[s]);
  uint64_t words = vec ? p.n / kPer : 0;
  reduceWords<Step, T>(p, scalar, words, g.rank(), g.size());
  reduceElems<Step, T>(p, scalar, words * kPer + g.rank(), p.n, g.size());
#else
  uint64_t begin, end;
  hostBlock(g, p.n, &begin, &end);
  reduceElems<Step, T>(p, scalar, begin, end, 1);
#endif
}

// On the GPU each datatype's reduction is its own function: inlined into the op loop, the 48
// (datatype, op) variants made the interpreter spill under the 128-register bound.
#if defined(__CUDA_ARCH__)
#define TSR_REDUCE_NOINLINE __noinline__
#else
#define TSR_REDUCE_NOINLINE
#endif

template <class T, class Group>
TSR_HOST_DEVICE TSR_REDUCE_NOINLINE void reduceTyped(const Group& g, const Piece& p, uint8_t kind,
                                                     uint64_t scalarBits) {
  const RedCompute<T> scalar = scalarOf<T>(scalarBits);
  switch (static_cast<RedKind>(kind)) {
    case RedKind::kProd: reducePiece<RedStepProd, T>(g, p, scalar); return;
    case RedKind::kMax: reducePiece<RedStepMax, T>(g, p, scalar); return;
    case RedKind::kMin: reducePiece<RedStepMin, T>(g, p, scalar); return;
    default: reducePiece<RedStepSum, T>(g, p, scalar); return;  // sum, avg, premulsum
  }
}

template <class Group>
TSR_INLINE void reduceDtype(const Group& g, const Piece& p, uint8_t dtype, uint8_t kind,
                            uint64_t bits) {
  switch (dtype) {
    case tsrInt8: reduceTyped<int8_t>(g, p, kind, bits); return;
    case tsrUint8: reduceTyped<uint8_t>(g, p, kind, bits); return;
    case tsrInt32: reduceTyped<int32_t>(g, p, kind, bits); return;
    case tsrUint32: reduceTyped<uint32_t>(g, p, kind, bits); return;
    case tsrInt64: reduceTyped<int64_t>(g, p, kind, bits); return;
    case tsrUint64: reduceTyped<uint64_t>(g, p, kind, bits); return;
    case tsrFloat16: reduceTyped<Float16>(g, p, kind, bits); return;
    case tsrFloat32: reduceTyped<float>(g, p, kind, bits); return;
    case tsrFloat64: reduceTyped<double>(g, p, kind, bits); return;
    case tsrBfloat16: reduceTyped<BFloat16>(g, p, kind, bits); return;
    case tsrFloat8e4m3: reduceTyped<Float8E4M3>(g, p, kind, bits); return;
    case tsrFloat8e5m2: reduceTyped<Float8E5M2>(g, p, kind, bits); return;
    default: return;  // refused before the item runs (dtypeBytes == 0)
  }
}

// buf[begin, end) /= nranks, this thread's share.
template <class T, class Group>
TSR_INLINE void avgTyped(const Group& g, char* buf, int nranks, uint64_t begin, uint64_t end) {
#if defined(__CUDA_ARCH__)
  avgRange(reinterpret_cast<T*>(buf), nranks, begin + g.rank(), end, g.size());
#else
  uint64_t b, e;
  hostBlock(g, end - begin, &b, &e);
  avgRange(reinterpret_cast<T*>(buf), nranks, begin + b, begin + e, 1);
#endif
}

template <class Group>
TSR_INLINE void avgDtype(const Group& g, uint8_t dtype, char* buf, int nranks, uint64_t begin,
                         uint64_t end) {
  switch (dtype) {
    case tsrInt8: avgTyped<int8_t>(g, buf, nranks, begin, end); return;
    case tsrUint8: avgTyped<uint8_t>(g, buf, nranks, begin, end); return;
    case tsrInt32: avgTyped<int32_t>(g, buf, nranks, begin, end); return;
    case tsrUint32: avgTyped<uint32_t>(g, buf, nranks, begin, end); return;
    case tsrInt64: avgTyped<int64_t>(g, buf, nranks, begin, end); return;
    case tsrUint64: avgTyped<uint64_t>(g, buf, nranks, begin, end); return;
    case tsrFloat16: avgTyped<Float16>(g, buf, nranks, begin, end); return;
    case tsrFloat32: avgTyped<float>(g, buf, nranks, begin, end); return;
    case tsrFloat64: avgTyped<double>(g, buf, nranks, begin, end); return;
    case tsrBfloat16: avgTyped<BFloat16>(g, buf, nranks, begin, end); return;
    case tsrFloat8e4m3: avgTyped<Float8E4M3>(g, buf, nranks, begin, end); return;
    case tsrFloat8e5m2: avgTyped<Float8E5M2>(g, buf, nranks, begin, end); return;
    default: return;
  }
}

}  // namespace devdetail
}  // namespace tessera::exec
