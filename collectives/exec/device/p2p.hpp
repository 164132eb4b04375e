// Sends and receives of the device executor (DESIGN.md, "Executors"): one kItemP2P item runs every
// send and receive of one group (tsrGroupStart/End) of one rank, on the GPU's CTAs or the
// emulation's host threads. __host__ __device__, so the CPU tests run the code the GPU runs.
//
// Protocol (the host executor's, collectives/exec/p2p.cpp, on device memory): each ordered pair of
// ranks has a ring of DeviceP2P::slots slots in the receiver's inbox. The sender writes a piece (a
// P2PPieceHeader and up to slotBytes of data) into the next slot when it holds a credit (fewer
// than `slots` pieces unacknowledged), then signals `data`; the receiver polls `data`, checks the
// header, copies the piece out and signals `ack`, which returns the credit. The counters persist
// across groups (DeviceP2PLink lives in device memory), so the k-th send to p meets p's k-th
// receive from this rank, and a slot is never overwritten before it was drained. A message of 0
// bytes still moves one header, so a receive of another size is reported (kWhyP2PSize) instead of
// waiting forever.
//
// Lanes and deadlock freedom: the host cuts a group into lanes (all sends to one peer, in call
// order; all receives from one peer; each send to self with its receive) and lane l runs on CTA
// l % nctas. A CTA visits its lanes round-robin and never waits inside one: a lane that cannot move
// (no credit, no data) yields to the next. So every lane moves as soon as its peer's matching lane
// has, whatever order the calls came in, and a group never deadlocks against its peers' groups.
// A send completes once its last piece is in the peer's ring (a small message needs no receiver
// yet), as on the host path.
//
// Deadline: a CTA none of whose lanes moved for the queue's timeout (TESSERA_TRANSPORT_TIMEOUT)
// records kWhyP2PSend or kWhyP2PRecv (tsrTimeout) naming the peer of its first unfinished lane, or
// kWhyAbort when the abort flag was raised; a failed queue ends the item at the next check.
//
// Memory order: the CTA's threads copy a piece, meet (g.sync()), and the leader then signals with
// release; the receiving leader acquires the signal before any thread of its CTA reads the slot,
// and signals `ack` only after every thread finished reading it.
#pragma once

#include <stdint.h>
#include <string.h>

#include "collectives/exec/device/copy.hpp"
#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "collectives/exec/protocols.hpp"
#include "tessera/device/atomics.hpp"

namespace tessera::exec {
namespace p2pdetail {

// Where one of this CTA's lanes stands: the transfer it moves and the bytes of it moved so far.
struct LaneAt {
  uint32_t at;
  uint32_t pad;
  uint64_t done;
};

enum : uint64_t { kStepBlocked = 0, kStepMove = 1, kStepFailed = 2, kStepFinished = 3 };

// The leader's decision for one lane, broadcast to the CTA (two halves of at most 16 bytes).
struct MovePtrs {
  const char* src;
  char* dst;
};
struct MoveSize {
  uint64_t bytes;
  uint64_t status;
};

struct Ctx {
  const WorkQueueHandle* q;
  const WorkItem* item;
  const P2PGroupDesc* d;
  const DeviceP2P* st;
  int32_t cta;
};

TSR_INLINE char* slotAt(char* ring, uint64_t piece, const DeviceP2P& st) {
  return ring + proto::ringSlot(piece, st.slots) * (kP2PHeaderBytes + st.slotBytes);
}

// Leader: the next piece of a send lane. Takes a credit when the ring is full and writes the
// piece's header into the peer's slot; the CTA then copies the data.
TSR_INLINE uint64_t sendStart(const Ctx& c, const P2PLane& lane, const LaneAt& at, MovePtrs* p,
                              uint64_t* bytes) {
  DeviceP2PLink& L = c.st->links[lane.peer];
  const P2PTransfer& t = c.d->transfers[at.at];
  if (!proto::ringHasCredit(L.sent, L.acked, c.st->slots)) {
    if (!L.ack.poll()) return kStepBlocked;
    ++L.acked;
  }
  const uint64_t n = minU64(c.st->slotBytes, t.bytes - at.done);
  char* slot = slotAt(L.peerInbox, L.sent, *c.st);
  auto* h = reinterpret_cast<uint64_t*>(slot);  // 64-byte aligned (P2PPieceHeader's words)
  h[0] = t.bytes;
  h[1] = at.done;
  h[2] = n;
  *p = MovePtrs{t.buf + at.done, slot + kP2PHeaderBytes};
  *bytes = n;
  return kStepMove;
}

// Leader: the next piece of a receive lane, if one arrived and its header fits the receive.
TSR_INLINE uint64_t recvStart(const Ctx& c, const P2PLane& lane, const LaneAt& at, MovePtrs* p,
                              uint64_t* bytes) {
  DeviceP2PLink& L = c.st->links[lane.peer];
  const P2PTransfer& t = c.d->transfers[at.at];
  if (!L.data.poll()) return kStepBlocked;
  char* slot = slotAt(L.inbox, L.received, *c.st);
  const auto* h = reinterpret_cast<const uint64_t*>(slot);
  const uint64_t message = h[0], offset = h[1], n = h[2];
  const WorkItem& it = *c.item;
  if (message != t.bytes) {
    recordError(*c.q, 5 /* tsrInvalidUsage */, kWhyP2PSize, it.seq, it.callNo, c.cta, -1, -1,
                lane.peer, t.bytes, message);
    return kStepFailed;
  }
  if (offset != at.done || n > t.bytes - at.done) {
    recordError(*c.q, 3 /* tsrInternalError */, kWhyP2POrder, it.seq, it.callNo, c.cta, -1, -1,
                lane.peer, at.done, offset);
    return kStepFailed;
  }
  *p = MovePtrs{slot + kP2PHeaderBytes, t.buf + at.done};
  *bytes = n;
  return kStepMove;
}

// Leader, after the CTA copied the piece: the signal that covers it, the counters, the lane's
// position.
TSR_INLINE void finish(const Ctx& c, const P2PLane& lane, LaneAt* at, uint64_t n) {
  if (lane.kind == kP2PLaneSelf) {
    at->at = lane.end;
    return;
  }
  DeviceP2PLink& L = c.st->links[lane.peer];
  if (lane.kind == kP2PLaneSend) {
    L.data.signal();
    ++L.sent;
  } else {
    ++L.received;
    L.ack.signal();
  }
  at->done += n;
  if (at->done == c.d->transfers[at->at].bytes) {
    ++at->at;
    at->done = 0;
  }
}

// One step of one lane, every thread of the CTA: at most one piece moved. Returns kStepMove when
// one did, else why not.
template <class Group>
TSR_INLINE uint64_t step(const Ctx& c, const Group& g, const P2PLane& lane, LaneAt* at) {
  MovePtrs p{nullptr, nullptr};
  uint64_t bytes = 0, status = kStepFinished;
  if (g.leader() && at->at < lane.end) {
    if (lane.kind == kP2PLaneSend) {
      status = sendStart(c, lane, *at, &p, &bytes);
    } else if (lane.kind == kP2PLaneRecv) {
      status = recvStart(c, lane, *at, &p, &bytes);
    } else {
      const P2PTransfer& src = c.d->transfers[lane.begin];
      p = MovePtrs{src.buf, c.d->transfers[lane.begin + 1].buf};
      bytes = src.bytes;
      status = kStepMove;
    }
  }
  p = g.broadcast(p);
  const MoveSize s = g.broadcast(MoveSize{bytes, status});
  if (s.status != kStepMove) return s.status;
  devdetail::copyPiece(g, p.dst, nullptr, p.src, s.bytes);
  g.sync();  // every thread's part of the piece is written (or read) before the leader signals
  if (g.leader()) finish(c, lane, at, s.bytes);
  g.sync();  // the lane's new position is seen by every thread
  return kStepMove;
}

// Leader: a CTA that stopped moving records why, naming its first unfinished lane.
TSR_INLINE void recordStuck(const Ctx& c, const LaneAt* at, uint32_t mine, uint32_t cta,
                            uint32_t nctas) {
  const WorkItem& it = *c.item;
  for (uint32_t k = 0; k < mine; ++k) {
    const P2PLane& lane = c.d->lanes[cta + k * nctas];
    if (at[k].at >= lane.end) continue;
    if (loadAcquire32(c.q->abortFlag) != 0) {
      recordError(*c.q, 6 /* tsrRemoteError */, kWhyAbort, it.seq, it.callNo, c.cta, -1, -1,
                  lane.peer);
    } else {
      recordError(*c.q, 8 /* tsrTimeout */, lane.kind == kP2PLaneSend ? kWhyP2PSend : kWhyP2PRecv,
                  it.seq, it.callNo, c.cta, -1, -1, lane.peer, at[k].done,
                  c.d->transfers[at[k].at].bytes);
    }
    return;
  }
  recordStop(*c.q, it.seq, it.callNo, c.cta, -1, -1, -1);
}

}  // namespace p2pdetail

// Runs this CTA's lanes of a kItemP2P item; false (recorded) on failure, in every thread.
template <class Group>
TSR_INLINE bool runP2PItem(const WorkQueueHandle& q, const WorkItem& item, const Group& g,
                           uint32_t cta, uint32_t nctas) {
  using namespace p2pdetail;
  // The CTA's own copy of the group: on a failed queue CTA 0 may complete the item while this CTA
  // still runs it, and a later trigger may then reuse the group's ring entry.
#if defined(__CUDA_ARCH__)
  __shared__ P2PGroupDesc d;
  __shared__ LaneAt at[kP2PMaxCalls];
  // Generic loads: in launch mode item.p2p is the kernel's parameter, which ld.global (copyPiece's
  // 16-byte path) cannot read. The g.sync() below orders the words before any field is read.
  static_assert(sizeof(P2PGroupDesc) % 8 == 0 && alignof(P2PGroupDesc) >= 8, "8-byte words");
  for (uint32_t i = g.rank(); i < sizeof(P2PGroupDesc) / 8; i += g.size())
    reinterpret_cast<uint64_t*>(&d)[i] = reinterpret_cast<const uint64_t*>(item.p2p)[i];
#else
  P2PGroupDesc d;
  LaneAt at[kP2PMaxCalls];
  memcpy(static_cast<void*>(&d), item.p2p, sizeof d);
#endif
  g.sync();
  const auto icta = static_cast<int32_t>(cta);
  if (d.nlanes > kP2PMaxCalls || d.ntransfers > kP2PMaxCalls ||
      (d.nlanes > 0 && d.state == nullptr)) {
    if (g.leader())
      recordError(q, 5 /* tsrInvalidUsage */, kWhyUnsupported, item.seq, item.callNo, icta, -1, -1,
                  -1);
    return false;
  }
  const uint32_t mine = d.nlanes > cta ? (d.nlanes - cta + nctas - 1) / nctas : 0;
  if (g.leader())
    for (uint32_t k = 0; k < mine; ++k) at[k] = LaneAt{d.lanes[cta + k * nctas].begin, 0, 0};
  g.sync();
  const Ctx c{&q, &item, &d, d.state, icta};
  uint64_t since = 0;  // leader: when the CTA was first seen idle since its last move
  for (uint32_t idle = 0;;) {
    bool moved = false, done = true;
    for (uint32_t k = 0; k < mine; ++k) {
      const P2PLane& lane = d.lanes[cta + k * nctas];
      for (;;) {
        const uint64_t s = step(c, g, lane, &at[k]);
        if (s == kStepFailed) return false;
        if (s != kStepMove) break;
        moved = true;
      }
      done = done && at[k].at >= lane.end;
    }
    if (done) return true;
    if (moved) {
      idle = 0;
      since = 0;
      continue;
    }
    ++idle;
    if ((idle & 15) == 0) {
      int stop = 0;  // 1: the queue failed; 2: the deadline passed
      if (g.leader()) {
        if (queueFailed(q)) {
          stop = 1;
        } else {
          const uint64_t now = device::clockNs();
          if (since == 0) since = now;
          if (now - since > q.timeoutNs) stop = 2;
        }
      }
      stop = g.broadcast(stop);
      if (stop == 2 && g.leader()) recordStuck(c, at, mine, cta, nctas);
      if (stop != 0) return false;
    }
    device::backoff(idle);
  }
}

}  // namespace tessera::exec
