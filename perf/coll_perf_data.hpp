// The check of the collective perf binaries (-c 1): inputs that depend on rank and index, and
// the expected outputs, computed in double outside the library.
//
// Inputs are small integers, exact in every type (FP8 E5M2 holds every integer up to 8 exactly):
//   sum, avg, premulsum: signed (3r + i) % 5 - 2, unsigned (3r + i) % 3
//   prod: 2 where (r + i) % 4 == 0, else 1; signed types negate where (7r + i) % 3 == 0, so
//         results are powers of two with either sign (exact in every type)
//   min, max: signed (7r + 3i) % 9 - 4, unsigned (7r + 3i) % 9
//   moved data (all_gather, broadcast, alltoall, sendrecv): signed (5r + 3i) % 17 - 8, unsigned
//         (5r + 3i) % 17
// Expected: sum, product, min, max over ranks; avg = sum / nranks (integers truncate toward
// zero, as NCCL); premulsum = sum of 2 * input (the perf binaries create it with scalar 2).
// Integers and moved data must match exactly. Floating-point sums may round at each step of a
// reduction in the narrow types, so they may differ by u * (nranks * largest partial sum + |exp|)
// where u is the type's unit roundoff; products, min and max are exact.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll_perf_common.hpp"
#include "coll_perf_options.hpp"

namespace tessera::perf {

// The value written where an output element is expected: outside every input and result range
// above (for up to 23 ranks), and exact in every type, so an element the collective never wrote
// counts as wrong.
inline constexpr double kSentinel = 96;

// Fills `count` elements of `dst` (host memory) with rank `rank`'s input for `op` (moved data
// when !reduces), starting at input element 0.
void fillInput(void* dst, size_t count, tsrDataType_t type, OpKind op, bool reduces, int rank);
// Fills `count` elements with `value` (which must be exact in the type).
void fillValue(void* dst, size_t count, tsrDataType_t type, double value);

// The number of elements of rank args.rank's output (`out`, host memory, `outCount` elements)
// that differ from what the collective defines; `args` is the call that produced it.
int64_t countWrong(const void* out, size_t outCount, const CollHooks& hooks, const CollArgs& args,
                   OpKind op);

// The scalar of the premulsum op, in the storage of `type` (at most 8 bytes written).
void preMulScalar(tsrDataType_t type, void* out);

}  // namespace tessera::perf
