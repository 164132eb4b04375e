// The op bodies of the executors (DESIGN.md, "One algorithm, two executors"), written once over a
// Backend so that the host executor (host_backend.hpp) and the device executor run the same code.
// A plan (plan.hpp) is compiled per rank into flat POD arrays (ExecOp, ExecRef) that a kernel can
// read as they are; nothing here names a host-only type.
//
// The data ops (put, get, copy, reduce, reduceSend) share one body: dst (and dst2) receive the
// left-to-right combination of the sources, one run of chunks at a time. Where the ops differ
// (put and reduceSend store to a peer, get and copy may load from one) is how a ref resolves,
// which is the backend's business: a local or mapped pointer, or a staging area it moves through
// a connection (load: fetched before the combine; store: sent after it).
//
// Backend interface (every member TSR_INLINE or host-only in a host backend):
//   uint64_t pieceElems(const ExecOp&, const ExecRef* refs)   largest piece one staged pass may
//                                                             move (UINT64_MAX: no staging)
//   const void** srcTable()                                   room for the plan's most sources
//   const void* load(const ExecRef&, int64_t segment, uint64_t elemOffset, uint64_t elems,
//                    int slot)
//   void* storeTarget(const ExecRef&, int64_t segment, uint64_t elemOffset, uint64_t elems)
//   bool combine(const ExecOp&, const ExecRef* srcs, void* dst, void* dst2, const void** srcs,
//                uint64_t elems)                              copy or reduce with the pre-op on
//                                                             input sources
//   bool commit(const ExecRef& dst, int64_t segment, uint64_t elemOffset, void* staged,
//               uint64_t elems)                               sends a staged store (no-op when
//                                                             storeTarget gave the real place)
//   bool signal(const ExecOp&)  StepResult tryWait(const ExecOp&)  bool flush(const ExecOp&)
//   StepResult tryBarrier(int worker)
//   int direct(const ExecOp&, const ExecRef& src, int64_t srcSegment, uint64_t srcOffset,
//              const ExecRef& dst, int64_t dstSegment, uint64_t dstOffset, uint64_t elems)
//                                                             a one-source op without dst2 done
//                                                             in one move the backend knows
//                                                             (1), or left to load / combine /
//                                                             commit (0); -1: it failed
// `elemOffset` counts from the start of the ref's segment `segment` in this iteration. A member
// that fails records why and returns false / nullptr / kError.
#pragma once

#include <stdint.h>

#include "tessera/device/host_device.hpp"

namespace tessera::exec {

enum class StepResult : uint8_t { kDone, kBlocked, kError };

// Op codes and buffer kinds as in plan.hpp (OpCode, BufferKind), as plain bytes.
enum : uint8_t {
  kExecPut,
  kExecGet,
  kExecCopy,
  kExecReduce,
  kExecReduceSend,
  kExecSignal,
  kExecWait,
  kExecFlush,
  kExecBarrier
};
enum : uint8_t { kExecInput, kExecOutput, kExecScratch };

// A ChunkRef bound to a rank: chunks [index, index + count) of `buffer` of this rank (peer < 0)
// or of the peer in slot `peer` of the bound plan.
// `segment` and `pos` are index / cps and index % cps, computed once when the plan is compiled.
struct ExecRef {
  int32_t index;
  int32_t count;
  int32_t segment;
  int32_t pos;
  int16_t peer;
  uint8_t buffer;
  uint8_t pad;
};

// One op of a worker. Data ops: refs[ref] is dst, then dst2 when hasDst2, then nsrcs sources.
// signal / wait: `sem` is the semaphore slot (peer, channel); flush: `peer` is the peer slot.
// `aligned`: every ref starts at the same chunk position of its segment.
// `scratchOnly` / `userOnly`: every ref is a scratch slot / a user buffer (see runDataOp).
struct ExecOp {
  uint8_t code;
  uint8_t hasDst2;
  uint8_t aligned;
  uint8_t scratchOnly;  // every ref is a scratch slot
  uint16_t nsrcs;
  int16_t peer;
  int16_t sem;
  uint8_t userOnly;  // no ref is a scratch slot
  uint8_t pad;
  uint32_t ref;
};

// The geometry of one iteration: every user segment holds `unit` elements, cut into `cps` chunks
// of `perChunk` = ceil(unit / cps) elements (the last ones short or empty). Scratch slots keep
// one geometry for every iteration and call: slot j of a scratch segment starts at j * `slot`
// (slice / cps, at least perChunk), so a credit that frees slot j frees the same bytes whatever
// the unit of the next iteration.
struct SliceLayout {
  uint64_t unit;
  uint64_t perChunk;
  uint64_t slot;
  int32_t cps;
};

TSR_INLINE uint64_t minU64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// The slice of a call (DESIGN.md, "The slice rule"): the most elements of a segment one iteration
// carries. Each of the plan's scratch chunks (scratchChunks: over all ranks, one past the highest
// scratch chunk an op names) gets a slot of whole 64-byte lines, all slots fitting scratchBytes,
// and a slice is cps slots; so a plan that cycles a few slots with credits gets large slices from
// a small scratch. The whole count when the plan uses no scratch. 0: the scratch cannot hold one
// slice. Every executor (host, device, simulated) cuts a call with this rule, so every rank
// iterates alike.
TSR_INLINE uint64_t sliceElements(uint64_t scratchBytes, int32_t scratchChunks, int32_t cps,
                                  uint64_t elemSize, uint64_t count) {
  if (scratchChunks <= 0) return count;
  const uint64_t line = 64 / elemSize;
  const uint64_t slot =
      scratchBytes / (static_cast<uint64_t>(scratchChunks) * elemSize) / line * line;
  return slot * static_cast<uint64_t>(cps);
}

// Iterations of a call of `count` elements cut into slices of `slice` (0 when slice is 0).
TSR_INLINE uint64_t sliceIterations(uint64_t count, uint64_t slice) {
  return slice == 0 ? 0 : (count + slice - 1) / slice;
}

// First element and length of chunk position `pos` in a segment.
TSR_INLINE uint64_t chunkBegin(const SliceLayout& L, int32_t pos) {
  return minU64(L.unit, static_cast<uint64_t>(pos) * L.perChunk);
}
TSR_INLINE uint64_t chunkLength(const SliceLayout& L, int32_t pos) {
  return minU64(L.unit, static_cast<uint64_t>(pos + 1) * L.perChunk) - chunkBegin(L, pos);
}

// The geometry of iteration `iter` of a call of `count` elements in slices of `slice`.
TSR_INLINE SliceLayout iterationLayout(uint64_t count, uint64_t slice, uint64_t iter, int32_t cps) {
  const uint64_t unit = minU64(slice, count - iter * slice);
  const auto c = static_cast<uint64_t>(cps);
  return SliceLayout{unit, (unit + c - 1) / c, slice / c, cps};
}

// How many elements step `step` (one chunk) moves. A ref to a user buffer (input or output)
// always names the chunk it holds, so its length is the data's; a scratch slot may hold a chunk of
// another position, so a scratch-only step moves a whole perChunk, which every slot can hold.
TSR_INLINE uint64_t stepLength(const ExecOp& op, const ExecRef* refs, int32_t step,
                               const SliceLayout& L) {
  uint64_t len = L.perChunk;
  bool user = false;
  for (int i = 0; i < 1 + op.hasDst2 + op.nsrcs; ++i) {
    const ExecRef& r = refs[op.ref + i];
    if (r.buffer == kExecScratch) continue;
    uint64_t n = chunkLength(L, (r.index + step) % L.cps);
    len = user ? minU64(len, n) : n;
    user = true;
  }
  return len;
}

// Where chunk `step` of a ref lies: its segment and its first element inside it.
TSR_INLINE void place(const ExecRef& r, int32_t step, const SliceLayout& L, int64_t* segment,
                      uint64_t* begin) {
  int32_t pos = r.pos + step;
  int64_t seg = r.segment;
  if (pos >= L.cps) {
    seg += pos / L.cps;
    pos %= L.cps;
  }
  *segment = seg;
  *begin = r.buffer == kExecScratch ? static_cast<uint64_t>(pos) * L.slot : chunkBegin(L, pos);
}

// dst [, dst2] <- srcs[0] op srcs[1] ... over every chunk of the op. Consecutive chunks of one
// segment are contiguous in a user buffer (stride perChunk) and in the scratch (stride slot);
// when every ref sits at the same positions and the strides agree (refs of one kind, or a full
// slice where perChunk == slot), the op moves one run per segment, else one chunk at a time.
template <class B>
TSR_INLINE StepResult runDataOp(B& b, const ExecOp& op, const ExecRef* refs, const SliceLayout& L) {
  const ExecRef& dst = refs[op.ref];
  const ExecRef* dst2 = op.hasDst2 ? &refs[op.ref + 1] : nullptr;
  const ExecRef* srcs = refs + op.ref + 1 + op.hasDst2;
  const void** table = b.srcTable();
  uint64_t piece = b.pieceElems(op, refs);
  bool runs =
      op.aligned && (dst.count == 1 || op.scratchOnly || op.userOnly || L.perChunk == L.slot);
  for (int32_t step = 0; step < dst.count;) {
    int32_t run = 1;
    uint64_t len;
    int64_t seg;
    uint64_t at;
    place(dst, step, L, &seg, &at);
    if (runs) {
      int32_t pos = (dst.pos + step) % L.cps;
      run = dst.count - step < L.cps - pos ? dst.count - step : L.cps - pos;
      len = op.scratchOnly ? static_cast<uint64_t>(run - 1) * L.slot + L.perChunk
                           : chunkBegin(L, pos + run) - chunkBegin(L, pos);
    } else {
      len = stepLength(op, refs, step, L);
    }
    for (uint64_t off = 0, n = 0; off < len; off += n) {
      n = minU64(piece, len - off);
      if (op.nsrcs == 1 && dst2 == nullptr) {
        int64_t sseg;
        uint64_t sat;
        place(srcs[0], step, L, &sseg, &sat);
        int moved = b.direct(op, srcs[0], sseg, sat + off, dst, seg, at + off, n);
        if (moved < 0) return StepResult::kError;
        if (moved > 0) continue;
      }
      for (int s = 0; s < op.nsrcs; ++s) {
        int64_t sseg;
        uint64_t sat;
        place(srcs[s], step, L, &sseg, &sat);
        table[s] = b.load(srcs[s], sseg, sat + off, n, s);
        if (table[s] == nullptr) return StepResult::kError;
      }
      void* d = b.storeTarget(dst, seg, at + off, n);
      if (d == nullptr) return StepResult::kError;
      void* d2 = nullptr;
      if (dst2 != nullptr) {
        int64_t seg2;
        uint64_t at2;
        place(*dst2, step, L, &seg2, &at2);
        if ((d2 = b.storeTarget(*dst2, seg2, at2 + off, n)) == nullptr) return StepResult::kError;
      }
      if (!b.combine(op, srcs, d, d2, table, n)) return StepResult::kError;
      if (!b.commit(dst, seg, at + off, d, n)) return StepResult::kError;
    }
    step += run;
  }
  return StepResult::kDone;
}

// Runs one op of worker `worker`. kBlocked: a wait or barrier cannot pass yet (try again later,
// nothing was consumed).
template <class B>
TSR_INLINE StepResult runOp(B& b, int worker, const ExecOp& op, const ExecRef* refs,
                            const SliceLayout& L) {
  switch (op.code) {
    case kExecSignal: return b.signal(op) ? StepResult::kDone : StepResult::kError;
    case kExecWait: return b.tryWait(op);
    case kExecFlush: return b.flush(op) ? StepResult::kDone : StepResult::kError;
    case kExecBarrier: return b.tryBarrier(worker);
    default: return runDataOp(b, op, refs, L);
  }
}

}  // namespace tessera::exec
