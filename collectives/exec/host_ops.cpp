// Host dispatch of the data kernels. Every case can run through the shared element kernels
// (reduce_kernels.hpp); the common ones run as SIMD blocks instead: each block of a few vectors
// is loaded from every source in turn into accumulators held in registers, then stored once, so a
// source is read once and dst (which may be a source) is written after its block was read.
//
// The SIMD code uses GCC vector extensions, whose lane operations are the same IEEE operations as
// the scalar ones, and mirrors the element functions step by step (the same operand order, the
// NaN-first min/max with its signed-zero rule, one rounding per step for the narrow floats), so
// its results are bit for bit those of the element kernels; the tests check that against the core
// reference. Two builds of each kernel exist on x86-64: the baseline and one for AVX2 + F16C,
// picked at run time. FMA is deliberately not enabled: contracting the premulsum multiply with the
// following add would skip a rounding.
#include "collectives/exec/host_ops.hpp"

#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "collectives/exec/reduce_kernels.hpp"
#include "core/datatype.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#define TSR_HOST_SIMD 1
#endif
#if defined(TSR_HOST_SIMD) && defined(__x86_64__)
#define TSR_HOST_AVX2 1
#include <immintrin.h>
// Vectors never cross a non-inlined call here (every kernel is flattened), so the ABI note about
// passing 32-byte vectors without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace tessera {
namespace {

constexpr Subsys kLogSubsys = Subsys::kColl;

std::atomic<HostSimd> gSimd{HostSimd::kBest};

bool cpuHasAvx2() {
#if defined(TSR_HOST_AVX2)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return has;
#else
  return false;
#endif
}

bool useAvx2() { return gSimd.load(std::memory_order_relaxed) == HostSimd::kBest && cpuHasAvx2(); }

#if defined(TSR_HOST_SIMD)

// Lane helpers are always inlined: they take vectors by value, which only makes sense in registers.
#define TSR_VEC_INLINE [[gnu::always_inline]] inline

// ---- Vectors and lane operations ---------------------------------------------------------------

template <class E, size_t kBytes>
struct VecOf {
  typedef E type __attribute__((vector_size(kBytes)));
};
template <class E, size_t kBytes>
using Vec = typename VecOf<E, kBytes>::type;
template <class V>
using LaneOf = std::remove_cvref_t<decltype(V{}[0])>;
template <class V>  // same lanes, as signed / unsigned integers (bit casts between them are free)
using IVec = typename VecOf<std::make_signed_t<std::conditional_t<
                                sizeof(LaneOf<V>) == 8, int64_t,
                                std::conditional_t<sizeof(LaneOf<V>) == 4, int32_t, int8_t>>>,
                            sizeof(V)>::type;
template <class V>
using UVec = typename VecOf<std::make_unsigned_t<LaneOf<IVec<V>>>, sizeof(V)>::type;

template <class V>
constexpr bool kFloatLanes = std::is_floating_point_v<LaneOf<V>>;

template <class V, class E>
TSR_VEC_INLINE V splat(E x) {
  V v{};
  for (size_t k = 0; k < sizeof(V) / sizeof(LaneOf<V>); ++k) v[k] = static_cast<LaneOf<V>>(x);
  return v;
}

// Integers wrap: add and multiply in unsigned lanes, as RedSum / RedProd do.
template <class V>
TSR_VEC_INLINE V vecAdd(const V& a, const V& b) {
  if constexpr (kFloatLanes<V>) return a + b;
  return (V)((UVec<V>)a + (UVec<V>)b);
}
template <class V>
TSR_VEC_INLINE V vecMul(const V& a, const V& b) {
  if constexpr (kFloatLanes<V>) return a * b;
  return (V)((UVec<V>)a * (UVec<V>)b);
}
// RedMax / RedMin lane by lane: NaN first (a before b), then the order, then equal values
// (only zeros' signs differ): max ANDs the bits (+0 wins), min ORs them (-0 wins).
template <bool kMax, class V>
TSR_VEC_INLINE V vecMinMax(const V& a, const V& b) {
  if constexpr (kFloatLanes<V>) {
    using I = IVec<V>;
    const I ia = (I)a, ib = (I)b;
    I r = (a < b) ? (kMax ? ib : ia) : ((b < a) ? (kMax ? ia : ib) : (kMax ? ia & ib : ia | ib));
    r = (b != b) ? ib : r;
    return (V)((a != a) ? ia : r);
  }
  if constexpr (kMax) return (a < b) ? b : a;
  return (b < a) ? b : a;
}

// One reduction step of the element kernels' Step, lane by lane.
template <class Step, class V>
TSR_VEC_INLINE V vecStep(const V& a, const V& b) {
  if constexpr (std::is_same_v<Step, RedStepSum>) return vecAdd(a, b);
  if constexpr (std::is_same_v<Step, RedStepProd>) return vecMul(a, b);
  if constexpr (std::is_same_v<Step, RedStepMax>) return vecMinMax<true>(a, b);
  if constexpr (std::is_same_v<Step, RedStepMin>) return vecMinMax<false>(a, b);
}

// ---- Codecs: storage lanes <-> compute vectors -------------------------------------------------
// load: kLanes elements (any alignment) to a compute vector, exactly; pack: the storage vector
// (S) of a compute vector, rounded once; round: what a pack followed by a load gives.

// kBytes: the vector width, 16 for the baseline (SSE2 registers), 32 for AVX2.
template <class T, size_t kBytes>
struct CodecWide {  // integers, float32, float64: the storage type is the compute type
  using V = Vec<T, kBytes>;
  static constexpr size_t kLanes = sizeof(V) / sizeof(T);
  TSR_VEC_INLINE static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  using S = V;
  TSR_VEC_INLINE static S pack(const V& v) { return v; }
  TSR_VEC_INLINE static V round(const V& v) { return v; }
};

// bfloat16 in integer lanes (no special instructions needed), rounding as encodeBFloat16 does.
// Unlike decodeBFloat16, load does not quiet a signalling NaN: no result can tell, since float
// arithmetic quiets it anyway, min/max return it unchanged, and pack makes every NaN canonical
// keeping only its sign.
template <size_t kBytes>
struct CodecBF16 {
  using V = Vec<float, kBytes>;
  using I = Vec<int32_t, kBytes>;
  using H = Vec<uint16_t, kBytes / 2>;
  using S = H;
  static constexpr size_t kLanes = kBytes / 4;
  // sign | magnitude rounded to nearest even at bit 16 (no carry reaches the sign: a finite
  // magnitude is at most 0x7F800000), or sign | 0x7FC0 for a NaN; in the low 16 bits.
  TSR_VEC_INLINE static I encodeBits(const V& f) {
    using U = Vec<uint32_t, kBytes>;
    const U u = (U)f;
    const U top = u >> 16;
    const I rounded = (I)((u + 0x7FFF + (top & 1)) >> 16);
    return (f != f) ? (I)((top & 0x8000) | 0x7FC0) : rounded;
  }
  TSR_VEC_INLINE static V load(const BFloat16* p) {
    H h;
    std::memcpy(&h, p, sizeof h);
    return (V)(__builtin_convertvector(h, I) << 16);
  }
  TSR_VEC_INLINE static S pack(const V& f) { return __builtin_convertvector(encodeBits(f), H); }
  TSR_VEC_INLINE static V round(const V& f) { return (V)(encodeBits(f) << 16); }
};

#if defined(TSR_HOST_AVX2)
#define TSR_AVX2_FN __attribute__((target("avx2,f16c")))

// float16 with F16C (AVX2 build only). VCVTPH2PS is exact and quiets a signalling NaN keeping its
// payload, as decodeFloat16 does. VCVTPS2PH with immediate 0 rounds to nearest even whatever
// MXCSR says, like encodeFloat16, but keeps a NaN's payload bits where encodeFloat16 gives the
// canonical sign | 0x7E00: so NaNs are made canonical (sign | 0x7FC00000) first.
struct CodecF16 {
  using V = Vec<float, 32>;
  using I = Vec<int32_t, 32>;
  static constexpr size_t kLanes = 8;
  using S = __m128i;
  TSR_AVX2_FN static S pack(V f) {
    const I u = (I)f;
    const I canon = (u & static_cast<int32_t>(0x80000000u)) | 0x7FC00000;
    return _mm256_cvtps_ph((__m256)((f != f) ? canon : u), _MM_FROUND_TO_NEAREST_INT);
  }
  TSR_AVX2_FN static V load(const Float16* p) {
    __m128i h;
    std::memcpy(&h, p, sizeof h);
    return (V)_mm256_cvtph_ps(h);
  }
  TSR_AVX2_FN static V round(V f) { return (V)_mm256_cvtph_ps(pack(f)); }
};

// bfloat16 loads as one zero-extending load and a shift (GCC splits the generic conversion).
struct CodecBF16Avx2 : CodecBF16<32> {
  TSR_AVX2_FN static V load(const BFloat16* p) {
    __m128i h;
    std::memcpy(&h, p, sizeof h);
    return (V)_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
  }
};

// A non-temporal store of a 16- or 32-byte vector to an address aligned to its size.
template <class S>
TSR_AVX2_FN void streamStore(void* p, S v) {
  if constexpr (sizeof(S) == 32) {
    _mm256_stream_si256(static_cast<__m256i*>(p), (__m256i)v);
  } else {
    static_assert(sizeof(S) == 16);
    _mm_stream_si128(static_cast<__m128i*>(p), (__m128i)v);
  }
}
#endif

// Writes a packed vector; kStream: with a non-temporal store (AVX2 build only).
template <bool kStream, class S>
TSR_VEC_INLINE void putVec(void* p, const S& v) {
#if defined(TSR_HOST_AVX2)
  if constexpr (kStream) return streamStore(p, v);
#endif
  std::memcpy(p, &v, sizeof v);
}

template <class T, size_t kBytes>
struct CodecFor {
  using type = CodecWide<T, kBytes>;
};
template <size_t kBytes>
struct CodecFor<BFloat16, kBytes> {
  using type = CodecBF16<kBytes>;
};
#if defined(TSR_HOST_AVX2)
template <>
struct CodecFor<Float16, 32> {
  using type = CodecF16;
};
template <>
struct CodecFor<BFloat16, 32> {
  using type = CodecBF16Avx2;
};
#endif

// Whether a SIMD build exists for T (float16 has one only with F16C).
template <class T, bool kAvx2>
constexpr bool kHasSimd = std::is_arithmetic_v<T> || std::is_same_v<T, BFloat16> ||
                          (kAvx2 && std::is_same_v<T, Float16>);

// ---- Block kernels -----------------------------------------------------------------------------

constexpr size_t kUnroll = 4;  // vectors per block: a block is 128 bytes of compute lanes

// Reduces whole blocks from element `begin` on; returns the first element not done (the caller
// finishes the tail). kStream: dst + begin is aligned to the vector width, and dst is written with
// non-temporal stores.
// The arguments are copied to locals first: the stores (memcpy) may alias anything, so fields
// read through `a` would be reloaded after every store. The unroll pragmas make the block loops
// straight-line code, which keeps the accumulators in registers.
template <class T, class Step, bool kPre, size_t kBytes, bool kStream = false>
inline size_t simdReduce(const ElemReduceArgs<T>& a, size_t begin, size_t count) {
  using C = typename CodecFor<T, kBytes>::type;
  using V = typename C::V;
  constexpr size_t kL = C::kLanes;
  const T* const* const srcs = a.srcs;
  const int nsrcs = a.nsrcs;
  const uint8_t* const preOp = a.preOp;
  T* const dst = a.dst;
  T* const dst2 = a.dst2;
  const V scalar = splat<V>(a.scalar);
  size_t i = begin;
  for (; i + kL * kUnroll <= count; i += kL * kUnroll) {
    V acc[kUnroll];
    const T* p = srcs[0] + i;
#pragma GCC unroll 4
    for (size_t k = 0; k < kUnroll; ++k) acc[k] = C::load(p + k * kL);
    if (kPre && preOp[0] != 0) {
#pragma GCC unroll 4
      for (size_t k = 0; k < kUnroll; ++k) acc[k] = C::round(vecMul(acc[k], scalar));
    }
    for (int s = 1; s < nsrcs; ++s) {
      p = srcs[s] + i;
      if (kPre && preOp[s] != 0) {
#pragma GCC unroll 4
        for (size_t k = 0; k < kUnroll; ++k) {
          acc[k] = vecStep<Step>(acc[k], C::round(vecMul(C::load(p + k * kL), scalar)));
        }
      } else {
#pragma GCC unroll 4
        for (size_t k = 0; k < kUnroll; ++k) acc[k] = vecStep<Step>(acc[k], C::load(p + k * kL));
      }
      // The step's rounding; after the last step, pack() rounds the same way.
      if (s + 1 < nsrcs) {
#pragma GCC unroll 4
        for (size_t k = 0; k < kUnroll; ++k) acc[k] = C::round(acc[k]);
      }
    }
#pragma GCC unroll 4
    for (size_t k = 0; k < kUnroll; ++k) putVec<kStream>(dst + i + k * kL, C::pack(acc[k]));
    if (dst2 != nullptr) {
#pragma GCC unroll 4
      for (size_t k = 0; k < kUnroll; ++k) putVec<false>(dst2 + i + k * kL, C::pack(acc[k]));
    }
  }
  return i;
}

// The avg post-op on float-computed types: one division by nranks in the compute type, rounded
// once by the store (avgElem).
template <class T, size_t kBytes>
inline size_t simdAvg(T* buf, size_t count, int nranks) {
  using C = typename CodecFor<T, kBytes>::type;
  using V = typename C::V;
  constexpr size_t kL = C::kLanes;
  const V n = splat<V>(nranks);
  size_t i = 0;
  for (; i + kL <= count; i += kL) putVec<false>(buf + i, C::pack(C::load(buf + i) / n));
  return i;
}

template <class T, class Step, bool kPre>
__attribute__((flatten)) void reduceBaseline(const ElemReduceArgs<T>& a, size_t count) {
  reduceRange<Step>(a, simdReduce<T, Step, kPre, 16>(a, 0, count), count, 1);
}
template <class T>
__attribute__((flatten)) void avgBaseline(T* buf, size_t count, int nranks) {
  avgRange(buf, nranks, simdAvg<T, 16>(buf, count, nranks), count, 1);
}
#if defined(TSR_HOST_AVX2)
// Outputs at least this large are written with non-temporal stores: beyond what a core keeps in
// the last-level cache, a normal store first reads the destination line (read for ownership),
// a third of a 2-source reduce's memory traffic. Measured on the development machine: streaming
// gains nothing at 4 MiB and doubles the 2-source float32 sum's speed at 16 MiB and more.
constexpr size_t kStreamBytes = size_t{8} << 20;

template <class T, class Step, bool kPre>
TSR_AVX2_FN __attribute__((flatten)) void reduceAvx2(const ElemReduceArgs<T>& a, size_t count) {
  const auto addr = reinterpret_cast<uintptr_t>(a.dst);
  if (count * sizeof(T) >= kStreamBytes && addr % sizeof(T) == 0) {
    // The element kernel up to the first 32-byte aligned element of dst, then streaming blocks,
    // then a fence: the caller's release store (its signal) must order after this data, and
    // non-temporal stores are not ordered by release/acquire alone.
    const size_t head = ((32 - addr % 32) % 32) / sizeof(T);
    reduceRange<Step>(a, 0, head, 1);
    reduceRange<Step>(a, simdReduce<T, Step, kPre, 32, true>(a, head, count), count, 1);
    _mm_sfence();
    return;
  }
  reduceRange<Step>(a, simdReduce<T, Step, kPre, 32>(a, 0, count), count, 1);
}
template <class T>
TSR_AVX2_FN __attribute__((flatten)) void avgAvx2(T* buf, size_t count, int nranks) {
  avgRange(buf, nranks, simdAvg<T, 32>(buf, count, nranks), count, 1);
}
#endif

#endif  // TSR_HOST_SIMD

// ---- Dispatch ----------------------------------------------------------------------------------

template <class T, class Step, bool kPre>
void reduceTyped(const ElemReduceArgs<T>& a, size_t count, bool avx2) {
#if defined(TSR_HOST_AVX2)
  if constexpr (kHasSimd<T, true>) {
    if (avx2) return reduceAvx2<T, Step, kPre>(a, count);
  }
#endif
#if defined(TSR_HOST_SIMD)
  if constexpr (kHasSimd<T, false>) return reduceBaseline<T, Step, kPre>(a, count);
#endif
  reduceRange<Step>(a, 0, count, 1);
}

template <class T>
void avgTyped(T* buf, size_t count, int nranks, bool avx2) {
  // Integer division has no SIMD instruction; those stay scalar.
  constexpr bool kFloatCompute = std::is_floating_point_v<RedCompute<T>>;
#if defined(TSR_HOST_AVX2)
  if constexpr (kFloatCompute && kHasSimd<T, true>) {
    if (avx2) return avgAvx2(buf, count, nranks);
  }
#endif
#if defined(TSR_HOST_SIMD)
  if constexpr (kFloatCompute && kHasSimd<T, false>) return avgBaseline(buf, count, nranks);
#endif
  avgRange(buf, nranks, 0, count, 1);
}

Result checkOp(const char* who, const RedOpDesc& op, tsrDataType_t dtype) {
  if (static_cast<unsigned>(op.kind) > static_cast<unsigned>(RedKind::kPreMulSum)) {
    return TSR_FAIL(tsrInvalidArgument, "%s: invalid reduction kind %d", who,
                    static_cast<int>(op.kind));
  }
  TSR_CHECK(dtypeCheck(dtype, who));
  if (op.kind == RedKind::kPreMulSum && op.dtype != dtype) {
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: premulsum op was created for datatype %s and cannot reduce %s", who,
                    dtypeName(op.dtype), dtypeName(dtype));
  }
  return tsrSuccess;
}

Result checkReduceArgs(const HostReduceArgs& a) {
  TSR_CHECK(checkOp("hostReduce", a.op, a.dtype));
  if (a.nsrcs < 1) {
    return TSR_FAIL(tsrInvalidArgument, "hostReduce: %d sources (need at least one)", a.nsrcs);
  }
  if (a.srcs == nullptr) {
    return TSR_FAIL(tsrInvalidArgument, "hostReduce: the array of %d source pointers is NULL",
                    a.nsrcs);
  }
  if (a.count == 0) return tsrSuccess;
  if (a.dst == nullptr) {
    return TSR_FAIL(tsrInvalidArgument, "hostReduce: NULL destination for %zu elements of %s",
                    a.count, dtypeName(a.dtype));
  }
  for (int s = 0; s < a.nsrcs; ++s) {
    if (a.srcs[s] == nullptr) {
      return TSR_FAIL(tsrInvalidArgument,
                      "hostReduce: source %d of %d is NULL (%zu elements of %s)", s, a.nsrcs,
                      a.count, dtypeName(a.dtype));
    }
  }
  return tsrSuccess;
}

}  // namespace

HostSimd setHostSimd(HostSimd simd) { return gSimd.exchange(simd); }

void hostCopyBytes(void* dst, void* dst2, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (dst != src) std::memcpy(dst, src, bytes);
  if (dst2 != nullptr && dst2 != src) std::memcpy(dst2, src, bytes);
}

Result hostReduce(const HostReduceArgs& a) {
  TSR_CHECK(checkReduceArgs(a));
  if (a.count == 0) return tsrSuccess;
  bool pre = false;
  if (a.op.kind == RedKind::kPreMulSum && a.preOp != nullptr) {
    for (int s = 0; s < a.nsrcs && !pre; ++s) pre = a.preOp[s] != 0;
  }
  if (a.nsrcs == 1 && !pre) {
    hostCopyBytes(a.dst, a.dst2, a.srcs[0], a.count * dtypeSize(a.dtype));
    return tsrSuccess;
  }
  const bool avx2 = useAvx2();
  dtypeVisit(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Typed copies of the source pointers (reading the void* array as T* would break aliasing
    // rules); a fixed array covers every realistic fan-in without allocating.
    constexpr int kInline = 64;
    const T* inlinePtrs[kInline];
    std::vector<const T*> heapPtrs;
    const T** ptrs = inlinePtrs;
    if (a.nsrcs > kInline) {
      heapPtrs.resize(static_cast<size_t>(a.nsrcs));
      ptrs = heapPtrs.data();
    }
    for (int s = 0; s < a.nsrcs; ++s) ptrs[s] = static_cast<const T*>(a.srcs[s]);
    ElemReduceArgs<T> e;
    e.srcs = ptrs;
    e.nsrcs = a.nsrcs;
    e.preOp = pre ? a.preOp : nullptr;
    e.scalar = pre ? preMulScalar<T>(a.op) : RedCompute<T>{};
    e.dst = static_cast<T*>(a.dst);
    e.dst2 = static_cast<T*>(a.dst2);
    redStepVisit(a.op.kind, [&](auto step) {
      using Step = decltype(step);
      if (pre) {
        reduceTyped<T, Step, std::is_same_v<Step, RedStepSum>>(e, a.count, avx2);
      } else {
        reduceTyped<T, Step, false>(e, a.count, avx2);
      }
    });
  });
  return tsrSuccess;
}

Result hostPostOp(const RedOpDesc& op, tsrDataType_t dtype, void* buf, size_t count, int nranks) {
  TSR_CHECK(checkOp("hostPostOp", op, dtype));
  if (count != 0 && buf == nullptr) {
    return TSR_FAIL(tsrInvalidArgument, "hostPostOp: NULL buffer for %zu elements of %s", count,
                    dtypeName(dtype));
  }
  if (op.kind != RedKind::kAvg) return tsrSuccess;
  if (nranks < 1) {
    return TSR_FAIL(tsrInvalidArgument, "hostPostOp: avg over %d ranks (must be >= 1)", nranks);
  }
  if (count == 0) return tsrSuccess;
  const bool avx2 = useAvx2();
  dtypeVisit(dtype, [&](auto tag) {
    using T = decltype(tag);
    avgTyped(static_cast<T*>(buf), count, nranks, avx2);
  });
  return tsrSuccess;
}

}  // namespace tessera
