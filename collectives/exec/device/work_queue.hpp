// The work queue of the device executor and the scheduler loop of its persistent kernel (DESIGN.md,
// "Executors"). All of it is __host__ __device__: the resident CTAs of a GPU run runScheduler(),
// and the CPU test suite runs the same function on host threads (HostGroup) against host memory, so
// the queue protocol is tested without a GPU.
//
// Posting. A poster (the tiny trigger kernel on the caller's stream, or a host thread in the
// emulation) claims a sequence number by adding one to `posted`, waits until the ring slot is free
// (consumed + size > seq), copies the item into the slot and publishes it by storing ready =
// seq + 1 last, with release. Claims are increments, so a trigger captured in a CUDA graph posts a
// new item at every replay (DESIGN.md: "triggers must be increments").
//
// Running. Every CTA walks the sequence numbers in order: its leader polls the slot's `ready`
// (acquire), the item is broadcast to the CTA, every CTA runs its share (Runner::runItem: the
// workers w with w % nctas == cta), the CTAs meet at a grid barrier, and CTA 0's leader completes
// the item: stores item.doneValue into *item.doneWord (release; the caller's stream waits for it
// with cuStreamWaitValue32, or a host thread polls it) and advances `consumed`, which frees the
// slot. Items of one queue therefore complete in order. A slot is freed only once no CTA can still
// read it: after the barrier, or, on a dead queue (no barrier), once every other CTA has left
// (GridSync::gone), which each does before it reads another slot.
//
// Failure. The first failure (a wait past its deadline, the abort flag, a failed proxy channel, a
// refused range) is recorded once in the ErrorRecord, and from then on the queue is dead: every
// wait and barrier sees the record and gives up, and every later item is completed at once without
// running (its doneWord is still written, so no stream waits forever). The host reports the record
// as the communicator's error. Stopping: a kItemStop item (posted in order, after the last call)
// or the stop flag (abort, destroy) ends the loop.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/group.hpp"
#include "core/cuda/fault_words.hpp"
#include "tessera/device/atomics.hpp"

namespace tessera::exec {

// kItemRun: run `plan` (device_backend.hpp); kItemLL: the LL protocol's one-shot exchange through
// `ll` (ll.hpp); kItemP2P: the sends and receives of one group (`p2p`, p2p.hpp); kItemStop: the
// resident kernel leaves its loop.
enum : uint8_t { kItemRun = 0, kItemStop = 1, kItemLL = 2, kItemP2P = 3 };

// WorkItem::callNo of a kItemP2P item: the engine's group number with this bit set, so that error
// sentences name a send/recv group rather than a collective call.
inline constexpr uint64_t kP2PCallBit = 1ull << 63;

// One collective call, as the executing side needs it (sizes in elements of `dtype`).
struct WorkItem {
  const DevicePlan* plan;
  const char* input;
  char* output;
  // Zero-copy calls (the buffers lie in windows, DeviceWindow): by rank, where each rank's window
  // holding the input (output) is mapped here; a peer's buffer is its entry plus the same offset
  // as this rank's (windows are symmetric). nullptr otherwise; an entry is nullptr once the window
  // was deregistered (a replayed graph then fails with kWhyBounds instead of touching it).
  char* const* peerInput;
  char* const* peerOutput;
  uint64_t peerInputOffset;
  uint64_t peerOutputOffset;
  // Zero-copy calls on locally registered buffers of ranks of one process (no windows): before
  // any worker runs, CTA 0 publishes this call's input and output on every peer's board (
  // peerBoards[r][rank], mapped here), and a grid barrier orders that before the plan's first
  // signal; a peer reads them after it waited for this rank's signal, from its own `board` (by
  // rank). The plan's completion waits keep a board entry from being overwritten while a peer
  // may still read it. nullptr otherwise. Between processes (`publishMapped`), what CTA 0
  // publishes on peer r's board is this rank's buffer as r mapped it: peerInput[r] +
  // peerInputOffset (and the output alike; nullptr for a buffer this rank does not use).
  PeerPointers* board;
  PeerPointers* const* peerBoards;
  const DeviceLL* ll;       // kItemLL: the LL inboxes
  const P2PGroupDesc* p2p;  // kItemP2P: the group (in the group ring, or a kernel param)
  uint32_t* doneWord;       // completion: doneValue is stored here (nullptr: none)
  uint64_t count;           // elements per user segment (CollCall's count)
  uint64_t slice;           // elements per scratch segment and iteration
  uint64_t iters;           // ceil(count / slice)
  uint64_t callNo;          // the engine's call number (error reports)
  uint64_t scalarBits;      // premulsum: the RedCompute<T> scalar's bytes, little end first
  uint32_t doneValue;
  int32_t root;           // rooted collectives (kItemLL)
  uint8_t kind;           // kItemRun, kItemStop, kItemLL, kItemP2P
  uint8_t collective;     // Collective (kItemLL)
  uint8_t dtype;          // tsrDataType_t
  uint8_t redKind;        // RedKind
  uint8_t preOp;          // input sources take the premulsum pre-op
  uint8_t postAvg;        // after each iteration, this rank's output of it is divided by nranks
  uint8_t publishMapped;  // boards between processes (see `board`)
  uint8_t pad;
  // Written by postItem: the item's sequence number, then ready = seq + 1 (release) last.
  uint64_t seq;
  uint64_t ready;
};

// Why an item failed (ErrorRecord::why).
enum : int32_t {
  kWhyNone = 0,
  kWhyTimeout = 1,      // a wait or barrier passed its deadline
  kWhyAbort = 2,        // the abort flag was raised (tsrCommAbort, a dead peer seen by the host)
  kWhyQueueFull = 3,    // a poster found no free slot before its deadline
  kWhyPort = 4,         // a proxy (port channel) operation failed
  kWhyBounds = 5,       // a range did not fit its buffer
  kWhyUnsupported = 6,  // an op the device executor cannot run (e.g. a load from an unmapped peer)
  kWhyEarlier = 7,      // the queue had failed before this item
  // Sends and receives (p2p.hpp); `peer` is the other rank, arg0 / arg1 as said.
  kWhyP2PSize = 8,   // a receive of arg0 bytes met a message of arg1 bytes
  kWhyP2POrder = 9,  // a piece arrived out of order (arg0: expected offset, arg1: its offset)
  kWhyP2PSend = 10,  // a send waited past its deadline for a free slot (arg0 of arg1 bytes sent)
  kWhyP2PRecv = 11,  // a receive waited past its deadline for data (arg0 of arg1 bytes received)
};

// The first failure of a queue. `code` (a tsrResult_t) is claimed with a compare-and-swap, the
// winner fills the rest and then sets `valid` (release): a reader that acquires valid == 1 sees
// every field.
struct ErrorRecord {
  uint64_t code;
  uint64_t valid;
  uint64_t seq;
  uint64_t callNo;
  int32_t why;
  int32_t cta;
  int32_t worker;
  int32_t op;    // index of the op in the plan's worker, -1 when none
  int32_t peer;  // rank, -1 when none
  int32_t pad;
  uint64_t arg0;  // details of some reasons (kWhyP2P*)
  uint64_t arg1;
};

// The grid barrier of one queue's CTAs (sense reversal: the last arriver resets `count` and bumps
// `generation`; everyone else waits for the generation to move). Works across kernel launches of
// one queue, as long as they do not overlap.
struct GridSync {
  uint64_t count;
  uint64_t generation;
  // CTAs other than 0 that left the loop without a stop item (a dead queue, the stop flag). CTA 0
  // frees the slot of an item the CTAs did not meet on (a dead queue) only once every other CTA
  // has left: a CTA still in the loop could be reading that slot while a poster rewrites it. Only
  // grows; a queue that failed or was stopped is not run again with a healthy item after it.
  uint64_t gone;
};

// Everything a poster and the executing side share; a POD copied into kernels. Where each word
// lives (device memory for `posted`, which kernels add to; host-visible memory for `error` and
// the flags the host writes) is device_executor.cpp's business.
struct WorkQueueHandle {
  WorkItem* items;   // `size` slots
  uint64_t* posted;  // sequence numbers claimed
  uint64_t* consumed;
  uint32_t* abortFlag;  // nonzero: fail everything now
  uint32_t* stopFlag;   // nonzero: leave the loop once no published item is waiting
  ErrorRecord* error;
  GridSync* grid;
  uint32_t size;
  uint32_t pad;
  uint64_t timeoutNs;  // every wait's deadline (TESSERA_TRANSPORT_TIMEOUT)
};

// The fault words' atomics (core/cuda/fault_words.hpp), shared with the fused kernels.
using device::casU64;
using device::loadAcquire32;
using device::storeRelease32;

// ---- failure ----

// Whether the queue is dead (a failure recorded) or aborted.
TSR_INLINE bool queueFailed(const WorkQueueHandle& q) {
  return device::loadAcquire(&q.error->code) != 0 || loadAcquire32(q.abortFlag) != 0;
}

// Records the first failure; later ones are dropped (the first explains the rest).
TSR_INLINE void recordError(const WorkQueueHandle& q, uint64_t code, int32_t why, uint64_t seq,
                            uint64_t callNo, int32_t cta, int32_t worker, int32_t op, int32_t peer,
                            uint64_t arg0 = 0, uint64_t arg1 = 0) {
  ErrorRecord* e = q.error;
  if (!casU64(&e->code, 0, code)) return;
  e->seq = seq;
  e->callNo = callNo;
  e->why = why;
  e->cta = cta;
  e->worker = worker;
  e->op = op;
  e->peer = peer;
  e->arg0 = arg0;
  e->arg1 = arg1;
  device::storeRelease(&e->valid, 1);
}

// The code to record when a wait gives up: abort wins over a deadline.
TSR_INLINE void recordStop(const WorkQueueHandle& q, uint64_t seq, uint64_t callNo, int32_t cta,
                           int32_t worker, int32_t op, int32_t peer) {
  if (loadAcquire32(q.abortFlag) != 0)
    recordError(q, 6 /* tsrRemoteError */, kWhyAbort, seq, callNo, cta, worker, op, peer);
  else
    recordError(q, 8 /* tsrTimeout */, kWhyTimeout, seq, callNo, cta, worker, op, peer);
}

// ---- posting ----

// Posts `item` (its seq and ready fields are ignored). Single-threaded: one thread of the trigger
// kernel, or a host thread. Returns the item's sequence number, or UINT64_MAX when no slot freed up
// before the deadline or the queue is dead and stopped: the failure is recorded, and the item's
// doneWord is written at once so that its caller does not wait forever.
// A kItemP2P item brings its group (`group`), copied into `groups` (one entry per queue slot, so
// an entry is free exactly when its slot is) before the item is published.
TSR_INLINE uint64_t postItem(const WorkQueueHandle& q, const WorkItem& item,
                             P2PGroupDesc* groups = nullptr, const P2PGroupDesc* group = nullptr) {
  uint64_t seq = device::fetchAddRelaxed(q.posted, 1);
  // Stopped (destroy, abort): the executing side has left or is leaving, and nothing would run the
  // item; completing it here keeps the poster's stream from waiting forever.
  if (loadAcquire32(q.stopFlag) != 0) {
    if (item.doneWord != nullptr) storeRelease32(item.doneWord, item.doneValue);
    return UINT64_MAX;
  }
  if (seq >= q.size) {
    uint64_t need = seq - q.size + 1;
    uint64_t start = device::clockNs();
    for (uint32_t iter = 0; device::loadAcquire(q.consumed) < need; ++iter) {
      // A dead queue is still drained (its items complete at once) until the stop flag ends the
      // loop: giving up earlier would leave a hole that the in-order scheduler waits at forever,
      // stranding the items posted behind it.
      if ((iter & 63) == 0 && ((queueFailed(q) && loadAcquire32(q.stopFlag) != 0) ||
                               device::clockNs() - start > q.timeoutNs)) {
        if (!queueFailed(q))
          recordError(q, 8 /* tsrTimeout */, kWhyQueueFull, seq, item.callNo, -1, -1, -1, -1);
        // The slot is never published: the executing side, seeing the failure, stops waiting for
        // it.
        if (item.doneWord != nullptr) storeRelease32(item.doneWord, item.doneValue);
        return UINT64_MAX;
      }
      device::backoff(iter);
    }
  }
  WorkItem* slot = &q.items[seq % q.size];
  // Everything before `seq`; `ready` is polled by the executing side and must not be written
  // here. memcpy, not uint64_t loads of a WorkItem: those break strict aliasing (the compiler
  // may order the caller's stores to `item` after them).
  memcpy(static_cast<void*>(slot), &item, offsetof(WorkItem, seq));
  if (group != nullptr && groups != nullptr) {
    P2PGroupDesc* g = &groups[seq % q.size];
    copyP2PGroup(g, *group);
    slot->p2p = g;
  }
  slot->seq = seq;
  device::storeRelease(&slot->ready, seq + 1);
  return seq;
}

// ---- the grid barrier ----

// Every CTA of `nctas` calls it with every thread. Returns false (in every thread of the CTA) when
// the queue failed or the deadline passed while waiting; the failure is then recorded, and the
// barrier's state is abandoned with the queue.
template <class Group>
TSR_INLINE bool gridBarrier(const WorkQueueHandle& q, const Group& g, uint32_t nctas, uint64_t seq,
                            uint64_t callNo, int32_t cta) {
  g.sync();  // the CTA's writes happen before the leader's release below
  bool ok = true;
  if (g.leader() && nctas > 1) {
    uint64_t gen = device::loadAcquire(&q.grid->generation);
    if (device::fetchAddRelease(&q.grid->count, 1) == nctas - 1) {
      // The add is release only; this acquire load of its result (the end of every arriver's
      // release sequence) makes the other CTAs' writes visible here, and through the release below
      // (and doneWord's) to the waiters and the completion's readers.
      (void)device::loadAcquire(&q.grid->count);
      device::storeRelaxed(&q.grid->count, 0);
      device::storeRelease(&q.grid->generation, gen + 1);
    } else {
      uint64_t start = device::clockNs();
      for (uint32_t iter = 0; device::loadAcquire(&q.grid->generation) == gen; ++iter) {
        if ((iter & 63) == 0) {
          if (queueFailed(q)) {
            ok = false;
            break;
          }
          // Twice the deadline: a CTA here waits for CTAs whose own waits have the deadline and
          // record why they failed (naming the peer), which is the sentence worth keeping.
          if (device::clockNs() - start > 2 * q.timeoutNs) {
            recordStop(q, seq, callNo, cta, -1, -1, -1);
            ok = false;
            break;
          }
        }
        device::backoff(iter);
      }
    }
  }
  return g.broadcast(ok);
}

// ---- the scheduler ----

// CTA 0's leader, before it frees the slot of an item of a dead queue: waits until every other CTA
// has left the loop (GridSync::gone), which each does at its next slot once it sees the failure:
// its waits and barriers give up on the record, so this is short. Bounded all the same (twice the
// deadline, as the barrier): past it the slot is freed, the failure being recorded long before.
TSR_INLINE void waitOthersGone(const WorkQueueHandle& q, uint32_t nctas) {
  if (nctas <= 1) return;
  const uint64_t start = device::clockNs();
  for (uint32_t iter = 0; device::loadAcquire(&q.grid->gone) < nctas - 1; ++iter) {
    if ((iter & 63) == 0 && device::clockNs() - start > 2 * q.timeoutNs) return;
    device::backoff(iter);
  }
}

// Runner interface:
//   bool runItem(const WorkItem& item, const Group& g, uint32_t cta, uint32_t nctas)
// runs this CTA's share of the item, every thread of the CTA calling it; returns false (in every
// thread) when the item failed, after recording why (recordError). It may use gridBarrier().
//
// Runs items from sequence number `first` until a stop; returns the number of the first item it did
// not take. CTA `cta` of `nctas`; every thread of the CTA calls it.
template <class Group, class Runner>
TSR_INLINE uint64_t runScheduler(const WorkQueueHandle& q, const Group& g, uint32_t cta,
                                 uint32_t nctas, uint64_t first, Runner& runner) {
  for (uint64_t seq = first;; ++seq) {
    WorkItem* slot = &q.items[seq % q.size];
    // 0: an item is ready; 1: leave (stop flag with nothing waiting, or a dead queue whose next
    // slot will never be published).
    int leave = 0;
    if (g.leader()) {
      for (uint32_t iter = 0; device::loadAcquire(&slot->ready) != seq + 1; ++iter) {
        if ((iter & 63) == 0 && loadAcquire32(q.stopFlag) != 0) {
          leave = device::loadAcquire(&slot->ready) == seq + 1 ? 0 : 1;
          break;
        }
        // A dead queue: CTA 0 completes the rest alone (see the next comment).
        if ((iter & 63) == 0 && cta != 0 && queueFailed(q)) {
          leave = 1;
          break;
        }
        // Idle: no deadline (a resident kernel waits for work for as long as the communicator
        // lives); the backoff ends in sleeps, so an idle leader costs its SM (or core) little.
        device::backoff(iter);
      }
    }
    // A CTA other than 0 does not read a slot of a dead queue: CTA 0 completes the items alone,
    // without the barrier that otherwise keeps a slot from being freed (and rewritten by a poster)
    // while a CTA still reads it; instead CTA 0 frees such slots only after every other CTA has
    // counted itself gone here.
    if (g.leader() && leave == 0 && cta != 0 && queueFailed(q)) leave = 1;
    if (g.broadcast(leave) != 0) {
      if (cta != 0 && g.leader()) (void)device::fetchAddRelease(&q.grid->gone, 1);
      return seq;
    }
    g.sync();
    const WorkItem item = *slot;  // every thread reads the published slot
    if (item.kind == kItemStop) {
      // Every CTA has read the stop before CTA 0 frees its slot (else a lagging CTA could read the
      // next round's item there, or wait forever for a ready value that was overwritten).
      bool met = false;
      if (!g.broadcast(g.leader() && queueFailed(q)))
        met = gridBarrier(q, g, nctas, seq, item.callNo, static_cast<int32_t>(cta));
      if (cta == 0 && g.leader()) {
        if (item.doneWord != nullptr) storeRelease32(item.doneWord, item.doneValue);
        if (!met) waitOthersGone(q, nctas);
        device::storeRelease(q.consumed, seq + 1);
      }
      if (cta != 0 && !met && g.leader()) (void)device::fetchAddRelease(&q.grid->gone, 1);
      return seq + 1;
    }
    bool ok = !g.broadcast(g.leader() && queueFailed(q));
    if (ok) ok = runner.runItem(item, g, cta, nctas);
    // A failed item abandons the barrier (other CTAs may be stuck in theirs until they see the
    // record): only a healthy queue meets there.
    if (ok) ok = gridBarrier(q, g, nctas, seq, item.callNo, static_cast<int32_t>(cta));
    if (!ok && g.leader() && device::loadAcquire(&q.error->code) == 0)
      recordError(q, 6 /* tsrRemoteError */, loadAcquire32(q.abortFlag) ? kWhyAbort : kWhyEarlier,
                  seq, item.callNo, static_cast<int32_t>(cta), -1, -1, -1);
    if (cta == 0 && g.leader()) {
      if (item.doneWord != nullptr) storeRelease32(item.doneWord, item.doneValue);
      if (!ok) waitOthersGone(q, nctas);  // not met at the barrier: a dead queue
      device::storeRelease(q.consumed, seq + 1);
    }
    g.sync();
  }
}

}  // namespace tessera::exec
