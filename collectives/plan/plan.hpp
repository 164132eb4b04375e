// The plan IR (DESIGN.md, "Plans"): a collective algorithm as data. A Plan holds one small
// program per rank; the verifier (verifier.hpp) proves it right, the executors run it, JSON
// (plan_json.hpp) stores it.
//
// ---- Buffers and chunks ------------------------------------------------------------------------
// Each rank has three buffers: kInput, kOutput and kScratch. A buffer is `segments` segments of
// `chunksPerSegment` chunks each; chunk c lies in segment c / chunksPerSegment at position
// j = c % chunksPerSegment. Ops name chunks, never bytes, so one plan serves every message size.
// At run time a segment holds `unit` elements (see segmentLayout), and chunk j of a segment is
// the element range [j * ceil(unit / cps), min(unit, (j + 1) * ceil(unit / cps))) of it (so the
// last chunks of a segment may be short or empty). The segments of input and output are fixed by
// the collective (inputSegments / outputSegments); the plan chooses the scratch's segments.
//
//   collective      input segments  output segments  unit (elements)
//   allreduce       1               1                count
//   reducescatter   nranks          1                recvcount
//   allgather       1               nranks           sendcount
//   broadcast       1               1                count   (only the root's input is read)
//   reduce          1               1                count   (only the root's output is written)
//   alltoall        nranks          nranks           count per peer
//
// Input and output chunks are always cut with the plan's chunksPerSegment. The scratch is cut
// into the same number of SLOTS per segment, but with one fixed geometry for every iteration and
// call: slot j of a scratch segment starts at j * (slice / cps) elements, where the slice is the
// most elements one iteration can carry (see below); a chunk placed in a slot uses its first
// length elements. So a credit that frees slot j frees the same bytes whatever the next
// iteration's unit, dtype or count (the slot's byte size does not depend on the dtype).
//
// ---- Slices (pipelining through the scratch) ---------------------------------------------------
// A plan that uses the scratch is run once per SLICE of the message: with a slice of S elements,
// iteration s runs the whole plan with unit = min(S, count - s*S), and segment k of the user's
// input/output starts at element k*count + s*S. The scratch (sized for S) is reused by every
// iteration, and semaphores keep counting across iterations and calls, so a plan that reuses
// scratch must itself wait for the peer's credit before it overwrites a slot the peer may still
// read (`credits` give the first iterations their initial credit). The verifier runs two
// iterations back to back to prove that reuse safe.
//
// ---- Ops ----------------------------------------------------------------------------------------
// A rank's plan is a list of workers (a thread block on the GPU, a cooperative task on the
// host); each worker runs its ops in order. A ChunkRef names `count` consecutive chunks
// [index, index + count) of one buffer of this rank (rank == -1) or of a peer (rank >= 0, the
// peer's own buffer: a remote reference). Ops apply chunk by chunk.
//   put        dst (remote) <- srcs[0] (local); if dst2 is set, srcs[0] is also stored to dst2
//              (local) in the same pass. Issued; complete at the next flush to that peer or at
//              a signal to it (a signal lands after the puts before it).
//   get        dst (local) <- srcs[0] (remote). Complete when the op ends.
//   copy       dst <- srcs[0], both local; or srcs[0] remote on a mapping transport (a direct
//              load from mapped peer memory).
//   reduce     dst (local) <- srcs[0] op srcs[1] op ... in the order listed (the order fixes the
//              floating-point result). Sources may be remote (loads from mapped peer memory).
//              dst may be one of the sources.
//   reduceSend dst (remote) <- srcs[0] op srcs[1] ...; if dst2 is set, the result is also stored
//              to dst2 (local). Like put, issued until the next flush/signal to dst's peer.
//   signal     adds one to semaphore (this rank -> peer, channel) at the peer, after every
//              put/reduceSend this rank issued to that peer before it (in any worker).
//   wait       consumes the next signal of semaphore (peer -> this rank, channel).
//   flush      completes every put/reduceSend issued to peer.
//   barrier    all workers of this rank meet (every worker must reach its k-th barrier).
// The reduction operator, datatype and pre/post ops (premulsum, avg) are the call's: a plan
// only says what is combined with what. Executors apply the pre-op to every value loaded through
// an INPUT ref (local or remote), never to values loaded from output or scratch, and apply the
// post-op to the rank's output after each iteration. So a plan reads original input through
// `input` refs only: in place (see below) an output chunk that aliases an input chunk still holds
// the raw input until the plan writes it, and reading it through `output` before that is an error
// the verifier reports.
//
// ---- In place
// ------------------------------------------------------------------------------------ Every plan
// must be correct in and out of place; the verifier checks both. In place, output chunks alias
// input chunks: allreduce, broadcast, reduce: output[c] is input[c]; allgather: output[r*cps + j]
// is input[j] on rank r; reducescatter: output[j] is input[r*cps + j] on rank r; alltoall has no
// in-place form (the API rejects it).
//
// A semaphore (peer, channel) is signalled by exactly one worker of the sender and waited on by
// exactly one worker of the receiver; over one iteration signals and waits balance (the verifier
// checks both). `credits` lists waits that are satisfied before any signal arrives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace tessera {

enum class Collective : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
};
inline constexpr int kCollectiveCount = 6;

// "allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall".
const char* collectiveName(Collective c);
// Parses those names (case-insensitive; also "all_reduce", "reduce_scatter", "all_gather",
// "all_to_all"). tsrInvalidArgument listing the valid names otherwise.
Result collectiveParse(const std::string& name, Collective* out);
// Whether the collective combines values (allreduce, reducescatter, reduce).
bool collectiveReduces(Collective c);
// Whether the collective has a root (broadcast, reduce).
bool collectiveHasRoot(Collective c);

enum class BufferKind : uint8_t { kInput, kOutput, kScratch };
inline constexpr int kBufferKinds = 3;
const char* bufferName(BufferKind b);  // "input", "output", "scratch"

enum class OpCode : uint8_t {
  kPut,
  kGet,
  kCopy,
  kReduce,
  kReduceSend,
  kSignal,
  kWait,
  kFlush,
  kBarrier
};
inline constexpr int kOpCodes = 9;
// "put", "get", "copy", "reduce", "reduceSend", "signal", "wait", "flush", "barrier".
const char* opName(OpCode op);
Result opParse(const std::string& name, OpCode* out);

struct ChunkRef {
  int32_t rank = -1;  // -1: this rank's buffer; otherwise that peer's buffer (remote)
  BufferKind buffer = BufferKind::kInput;
  int32_t index = 0;  // first chunk
  int32_t count = 1;  // chunks [index, index + count)
  bool remote() const { return rank >= 0; }
  bool operator==(const ChunkRef&) const = default;
};

struct Op {
  OpCode code = OpCode::kBarrier;
  int32_t peer = -1;     // signal / wait / flush: the peer; data ops: -1 (the refs say)
  int32_t channel = 0;   // signal / wait: the semaphore channel (0 <= channel < kMaxChannels)
  ChunkRef dst;          // put / get / copy / reduce / reduceSend
  bool hasDst2 = false;  // put / reduceSend: also store what is sent to dst2 (local)
  ChunkRef dst2;
  std::vector<ChunkRef> srcs;  // put/get/copy: exactly one; reduce/reduceSend: two or more
  bool operator==(const Op&) const = default;
};

// A wait on (peer, channel) of this rank that succeeds `initial` times before any signal.
struct Credit {
  int32_t peer = 0;
  int32_t channel = 0;
  int32_t initial = 0;
  bool operator==(const Credit&) const = default;
};

struct Worker {
  std::vector<Op> ops;
  bool operator==(const Worker&) const = default;
};

struct RankPlan {
  int32_t scratchSegments = 0;  // 0: the rank uses no scratch
  std::vector<Credit> credits;
  std::vector<Worker> workers;
  bool operator==(const RankPlan&) const = default;
};

struct Plan {
  std::string name;  // e.g. "allreduce.ring.n8"; informational
  Collective collective = Collective::kAllReduce;
  std::string algorithm;  // generator name, e.g. "ring"; "custom" for a hand-written plan
  int32_t nranks = 1;
  int32_t root = 0;  // broadcast / reduce
  int32_t chunksPerSegment = 1;
  // True when ops reach peers' input or output (zero-copy): the executor can run the plan only
  // when every rank's user buffers are registered with the communicator.
  bool zeroCopy = false;
  // True when every reduction combines the contributions of ranks 0, 1, ..., n-1 in that order
  // (one left-to-right chain per chunk), so floating-point results do not depend on the
  // algorithm (TESSERA_DETERMINISTIC=1 picks only such plans). Checked by the verifier.
  bool canonicalOrder = false;
  std::vector<RankPlan> ranks;  // size nranks
  bool operator==(const Plan&) const = default;
};

// Limits that make a hostile plan fail cleanly instead of exhausting memory.
// 8192 ranks: a simulated cluster (tessera_sim) of 1,024 eight-GPU nodes; every per-rank limit
// below still bounds what one rank's program may hold.
inline constexpr int32_t kMaxPlanRanks = 8192;
inline constexpr int32_t kMaxChunksPerSegment = 4096;
inline constexpr int32_t kMaxScratchSegments = 4096;
inline constexpr int32_t kMaxWorkers = 64;
inline constexpr int32_t kMaxChannels = 64;
inline constexpr int64_t kMaxOpsPerRank = 1 << 20;
inline constexpr int32_t kMaxSrcs = 1024;

// Segments of each buffer of a rank in plan `p` (scratch: the rank's scratchSegments).
int32_t bufferSegments(const Plan& p, int rank, BufferKind b);
int32_t inputSegments(Collective c, int nranks);
int32_t outputSegments(Collective c, int nranks);
// Chunks of a buffer = segments * chunksPerSegment.
int64_t bufferChunks(const Plan& p, int rank, BufferKind b);
// One past the highest scratch chunk any op of any rank names (0: the plan uses no scratch); the
// slice rule gives each of these chunks a slot (DESIGN.md, "The slice rule").
int32_t scratchChunksUsed(const Plan& plan);

// Element range of chunk `chunk` of a buffer with `cps` chunks per segment, for a segment of
// `unit` elements: the offset of the chunk inside its segment and its length.
struct ChunkSpan {
  int64_t segment = 0;
  uint64_t offset = 0;  // elements from the start of the segment
  uint64_t length = 0;  // elements (0 for an empty trailing chunk)
};
ChunkSpan chunkSpan(int64_t chunk, int32_t cps, uint64_t unit);

// Structural checks that need no simulation: sizes and limits, ranks and peers in range (a peer
// is never the rank itself in a ref, signal or wait), chunk ranges inside their buffers, the op's
// operand counts, remote refs only where the op allows them, credits in range. Returns
// tsrInvalidArgument with the path of the first offending field, e.g.
// "plan: ranks[2].workers[0].ops[5].srcs[1].index: chunk 9 out of range (input has 8 chunks)".
Result checkPlanShape(const Plan& p);

// A one-line description of an op, e.g. "put input[3] -> rank 2 scratch[3..4]" (for show and
// error sentences).
std::string describeOp(const Op& op);

}  // namespace tessera
