// The collective perf binaries (all_reduce_perf, all_gather_perf, ...): nccl-tests' options,
// output and conventions over tessera's C API, so its users feel at home. Each binary is a table
// of hooks (CollHooks) handed to collPerfMain; everything else is shared.
//
// Sizes, counts and bandwidths follow nccl-tests (src/*.cu, getCollByteCount and getBw), so
// figures can be put side by side with NCCL's:
//   - The sweep runs over `size` = bytes from -b to -e; count = size / sizeof(type).
//   - all_reduce, broadcast, reduce, sendrecv: each rank's buffers hold `count` elements; the
//     size column is count * sizeof(type).
//   - all_gather: each rank sends count / nranks elements (rounded down to a multiple of 16 bytes)
//     and receives nranks times that; reduce_scatter: each rank sends nranks times the per-rank
//     count and receives it once; alltoall: both buffers hold nranks blocks of the per-rank count.
//     For these three the size column is the whole buffer (sendcount or recvcount, the larger,
//     times sizeof(type)) and the count column is the per-rank count (the API's count argument).
//   - algbw = bytes / time with bytes = size as printed (all_gather, reduce_scatter, alltoall:
//     per-rank count * nranks * sizeof(type)); time is the average per call over the -n timed
//     iterations (after -w untimed ones), combined over ranks by -a (0: rank 0, 1: average,
//     2: minimum, 3: maximum).
//   - busbw = algbw * factor, the factor that makes it comparable with the link bandwidth:
//     all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce,
//     sendrecv 1.
//   - In place as NCCL defines it (tessera.h): all_reduce/broadcast/reduce send == recv;
//     all_gather send = recv + rank * count; reduce_scatter recv = send + rank * count. alltoall
//     and sendrecv have no in-place form here (their in-place columns print N/A).
//   - #wrong: elements that differ from the expected result, summed over ranks. Inputs are small
//     integers that depend on rank and index (exact in every type, FP8 included); the expected
//     output is computed here in double, and compared exactly for integers and for moved data,
//     within the rounding a reduction in that type may make for floating-point reductions.
#pragma once

#include <cstddef>

#include "tessera/tessera.h"

namespace tessera::perf {

// Per-rank element counts of one size step (see above).
struct CollSizes {
  size_t sendCount = 0;   // elements in the send buffer
  size_t recvCount = 0;   // elements in the receive buffer
  size_t paramCount = 0;  // the API's count argument
  // In place both pointers point into one buffer of max(send, recv) elements, at these offsets
  // times the rank (as nccl-tests: all_gather sends from recv + rank * count).
  size_t sendInPlaceOffset = 0;
  size_t recvInPlaceOffset = 0;
};

// One call of the collective, as a rank makes it.
struct CollArgs {
  tsrComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  tsrDataType_t dtype = tsrFloat32;
  tsrRedOp_t op = tsrSum;
  size_t count = 0;  // CollSizes::paramCount
  const void* send = nullptr;
  void* recv = nullptr;
  // -m device: the rank's CUDA stream (each rank has its own: ranks sharing one stream would wait
  // for each other's calls in stream order and deadlock); null for host buffers.
  tsrStream_t stream = nullptr;
};

// Where element `index` of a rank's output comes from: the reduction over all ranks of input
// element `index`, a copy of rank `fromRank`'s input element `index`, or nothing (the element is
// not written, e.g. reduce on a rank that is not the root).
struct Source {
  enum Kind { kReduce, kCopy, kUnwritten } kind = kUnwritten;
  int fromRank = 0;
  size_t index = 0;
};

// MPI's own collective for --baseline mpi, run on the same buffers (coll_perf_mpi.cpp, the one
// file that speaks MPI, so that the binaries build the same with or without it).
enum class MpiColl {
  kNone,
  kAllreduce,
  kAllgather,
  kReduceScatterBlock,
  kBcast,
  kReduce,
  kAlltoall,
  kSendrecvRing,  // MPI_Sendrecv to rank + 1 from rank - 1
};

struct CollHooks {
  const char* name;  // nccl-tests' name without "_perf": "all_reduce"
  bool reduces;      // takes -o
  bool rooted;       // takes -r
  bool hasInPlace;
  double (*busFactor)(int nranks);
  // count = size / sizeof(type); eltSize = sizeof(type).
  void (*sizes)(size_t count, size_t eltSize, int nranks, CollSizes* out);
  tsrResult_t (*run)(const CollArgs& args);
  // Source of output element `index` of rank args.rank (args.count and root are the call's).
  Source (*source)(const CollArgs& args, size_t index);
  MpiColl mpi;
};

// The whole program: parses argv, makes the ranks, runs the sweep, prints the table. Returns the
// exit status: 0 when every check passed, 1 on wrong values or errors, 2 on bad usage (including
// a memory kind or feature this build or the library does not support yet).
int collPerfMain(int argc, char** argv, const CollHooks& hooks);

// Per-rank element count of the split collectives (all_gather, reduce_scatter, alltoall):
// count / nranks, rounded down to a multiple of 16 bytes as nccl-tests does.
size_t perRankCount(size_t count, size_t eltSize, int nranks);

// Hooks that several collectives share (the factors and sizes above).
// busbw factor 1: broadcast, reduce, sendrecv.
double busFactorOne(int nranks);
// busbw factor (n - 1) / n: all_gather, reduce_scatter, alltoall.
double busFactorShare(int nranks);
// Both buffers and the call hold `count` elements: all_reduce, broadcast, reduce, sendrecv.
void sizesOfCount(size_t count, size_t eltSize, int nranks, CollSizes* out);

}  // namespace tessera::perf
