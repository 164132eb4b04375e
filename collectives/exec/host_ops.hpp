// The host executor's data kernels: reduce, copy and post-op over host memory (local buffers or
// mapped peer memory), dispatched at run time over datatype and op. Results are bit for bit those
// of core/reduce_op.hpp's reference kernels (the same element functions, collectives/exec/
// reduce_kernels.hpp); the hot cases (float32/float64/integers, float16/bfloat16 through float)
// run as SIMD blocks, with AVX2 + F16C code chosen at run time where the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/reduce_op.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"

namespace tessera {

struct HostReduceArgs {
  RedOpDesc op;  // the call's op (kAvg and kPreMulSum reduce as sum)
  tsrDataType_t dtype;
  const void* const* srcs;  // nsrcs >= 1 source pointers, each `count` elements
  int nsrcs;
  const uint8_t* preOp;  // nullptr, or per source: 1 = apply the op's pre-op (premulsum
                         // scalar multiply) to this source's values as they are loaded
  void* dst;             // count elements; may be the very same pointer as a source
  void* dst2;            // nullptr, or a second destination getting the same values
  size_t count;
};

// dst = pre(srcs[0]) op pre(srcs[1]) op ... left to right, one rounding per step for narrow
// floats (exactly as reduceAllHost without the post-op); nsrcs == 1 is a copy (with pre-op).
// Buffers need only the element type's alignment. A destination must not partially overlap a
// source. count == 0 accepts NULL pointers. Large outputs may be written with non-temporal
// stores; the call fences them before it returns, so a release store after it (a signal) orders
// after the data as usual.
Result hostReduce(const HostReduceArgs& a);

// memcpy-speed copy for the plain case (no pre-op); dst2 optional. dst == src copies nothing.
void hostCopyBytes(void* dst, void* dst2, const void* src, size_t bytes);

// The post-op (avg: divide by nranks) on count elements in place; nothing for other ops.
Result hostPostOp(const RedOpDesc& op, tsrDataType_t dtype, void* buf, size_t count, int nranks);

// Which SIMD code the kernels run. kBest (the default) is the best this CPU supports; kBaseline
// is the code every x86-64 runs. Tests run both against the reference. Returns the previous
// setting; thread-safe, takes effect for calls that start after it.
enum class HostSimd : uint8_t { kBaseline, kBest };
HostSimd setHostSimd(HostSimd simd);

}  // namespace tessera
