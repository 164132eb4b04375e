// The item runner of the device executor's scheduler (work_queue.hpp): how one CTA (Group) runs
// its share of a WorkItem, a plan through the device backend (device_backend.hpp), an LL exchange
// (ll.hpp) or a send/recv group (p2p.hpp). __host__ __device__, like everything it runs.
//
// Contract (implemented in this header):
//
//   template <class Group> struct DeviceItemRunner {
//     WorkQueueHandle queue;
//     bool runItem(const WorkItem& item, const Group& g, uint32_t cta, uint32_t nctas);
//   };
//
// runItem runs the plan `item.plan` once per slice (item.iters iterations; iteration i covers
// elements [i * slice, min(count, (i + 1) * slice)) of every user segment, the SliceLayout of
// host_executor.cpp's beginIteration), the CTA running the plan's workers w with w % nctas == cta
// cooperatively (a worker that blocks on a wait or barrier yields to the CTA's next worker; a CTA
// that made no progress for queue.timeoutNs records kWhyTimeout), with a grid barrier between
// iterations, the avg post-op (item.postAvg) over the iteration's output by all CTAs, and the same
// results, bit for bit, as the host executor (the element functions of reduce_kernels.hpp; on the
// GPU with 16-byte vector loads and stores where every pointer of a piece is 16-byte aligned).
// Ops reach peers through DevicePlan: mapped peers by loads and stores, unmapped peers by puts and
// signals through their port channel, staged in the CTA's part of the staging area (a load from an
// unmapped peer records kWhyUnsupported). On failure it records why (recordError) and returns
// false in every thread.
#pragma once

#include <stdint.h>

#include "collectives/exec/device/device_backend.hpp"
#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/ll.hpp"
#include "collectives/exec/device/p2p.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "collectives/exec/ops.hpp"

namespace tessera::exec {

namespace devdetail {

// Runs the CTA's workers of one iteration round-robin until all are done. False (recorded) on a
// failed op, a failed queue, or no progress for the queue's timeout.
template <class Group>
TSR_INLINE bool runWorkers(const WorkQueueHandle& q, const WorkItem& item, DeviceBackend<Group>& b,
                           const Group& g, const SliceLayout& L, uint32_t* pc, int32_t mine,
                           uint32_t cta, uint32_t nctas) {
  const DevicePlan& P = *item.plan;
  uint64_t since = 0;  // leader: when the CTA was first seen idle since its last progress
  for (uint32_t idle = 0;;) {
    bool moved = false, done = true;
    for (int32_t k = 0; k < mine; ++k) {
      const auto w = static_cast<int32_t>(cta + static_cast<uint32_t>(k) * nctas);
      const uint32_t end = P.workerBegin[w + 1];
      uint32_t at = pc[k];
      while (at < end) {
        b.at(w, at);
        StepResult r = runOp(b, w, P.ops[at], P.refs, L);
        if (r == StepResult::kBlocked) break;
        if (r == StepResult::kError) return false;
        ++at;
        moved = true;
      }
      pc[k] = at;
      done = done && at == end;
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
          uint64_t now = device::clockNs();
          if (since == 0) since = now;
          if (now - since > q.timeoutNs) stop = 2;
        }
      }
      stop = g.broadcast(stop);
      if (stop == 2 && g.leader()) {
        // Name the first blocked worker, its op and the peer it waits for.
        for (int32_t k = 0; k < mine; ++k) {
          const auto w = static_cast<int32_t>(cta + static_cast<uint32_t>(k) * nctas);
          if (pc[k] == P.workerBegin[w + 1]) continue;
          const ExecOp& op = P.ops[pc[k]];
          int32_t peer = op.code == kExecWait ? P.peers[P.sems[op.sem].peerSlot].rank : -1;
          recordStop(q, item.seq, item.callNo, static_cast<int32_t>(cta), w,
                     P.planOpIndex != nullptr ? P.planOpIndex[pc[k]] : -1, peer);
          break;
        }
      }
      if (stop != 0) return false;
    }
    device::backoff(idle);
  }
}

}  // namespace devdetail

template <class Group>
struct DeviceItemRunner {
  WorkQueueHandle queue;
  TSR_INLINE bool runItem(const WorkItem& item, const Group& g, uint32_t cta, uint32_t nctas);
};

template <class Group>
TSR_INLINE bool DeviceItemRunner<Group>::runItem(const WorkItem& item, const Group& g, uint32_t cta,
                                                 uint32_t nctas) {
  if (item.kind == kItemLL) return runLLItem(queue, item, g, cta, nctas);
  if (item.kind == kItemP2P) return runP2PItem(queue, item, g, cta, nctas);
#if defined(__CUDA_ARCH__)
  __shared__ const void* table[kMaxDeviceSrcs];  // every thread writes the same pointers
#else
  const void* table[kMaxDeviceSrcs];
#endif
  DeviceBackend<Group> b(queue, item, g, cta, nctas, table);
  const DevicePlan& P = *item.plan;
  const auto workers = static_cast<uint32_t>(P.workers > 0 ? P.workers : 0);
  const auto mine = static_cast<int32_t>(workers > cta ? (workers - cta + nctas - 1) / nctas : 0);
  if (mine > kMaxCtaWorkers || P.maxSrcs > kMaxDeviceSrcs || b.elemSize() == 0 || P.cps <= 0) {
    b.fail(devdetail::kCodeInvalidUsage, kWhyUnsupported, -1);
    return false;
  }
  if (item.peerBoards != nullptr) {
    // Publish this call's buffers on the peers' boards (WorkItem::board) before any worker can
    // signal: the grid barrier's release (or, with one CTA, the CTA barrier and the signal's own
    // release) orders these stores before every signal of the call.
    if (cta == 0 && g.leader()) {
      for (int32_t r = 0; r < P.nranks; ++r) {
        PeerPointers* const peer = item.peerBoards[r];
        if (r == P.rank || peer == nullptr) continue;
        auto in = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(item.input));
        auto out = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(item.output));
        if (item.publishMapped) {  // between processes: this rank's buffers as rank r maps them
          in = item.peerInput == nullptr || item.peerInput[r] == nullptr
                   ? 0
                   : static_cast<uint64_t>(reinterpret_cast<uintptr_t>(item.peerInput[r])) +
                         item.peerInputOffset;
          out = item.peerOutput == nullptr || item.peerOutput[r] == nullptr
                    ? 0
                    : static_cast<uint64_t>(reinterpret_cast<uintptr_t>(item.peerOutput[r])) +
                          item.peerOutputOffset;
        }
        device::storeRelaxed(reinterpret_cast<uint64_t*>(&peer[P.rank].input), in);
        device::storeRelaxed(reinterpret_cast<uint64_t*>(&peer[P.rank].output), out);
      }
    }
    g.sync();
    if (!gridBarrier(queue, g, nctas, item.seq, item.callNo, static_cast<int32_t>(cta)))
      return false;
  }
  uint32_t pc[kMaxCtaWorkers];
  for (uint64_t it = 0; it < item.iters; ++it) {
    const uint64_t off = it * item.slice;
    const SliceLayout L = iterationLayout(item.count, item.slice, it, P.cps);
    const uint64_t unit = L.unit;
    b.beginIteration(off);
    for (int32_t k = 0; k < mine; ++k)
      pc[k] = P.workerBegin[cta + static_cast<uint32_t>(k) * nctas];
    if (!devdetail::runWorkers(queue, item, b, g, L, pc, mine, cta, nctas)) return false;
    // The scheduler meets at a grid barrier after the item, so the last iteration needs none of
    // its own unless the post-op must wait for every CTA's output.
    const bool last = it + 1 == item.iters;
    const auto c = static_cast<int32_t>(cta);
    if (item.postAvg) {
      if (!gridBarrier(queue, g, nctas, item.seq, item.callNo, c)) return false;
      const uint64_t per = (unit + nctas - 1) / nctas;
      const uint64_t begin = minU64(unit, per * cta);
      devdetail::avgDtype(g, item.dtype, item.output + off * b.elemSize(), P.nranks, begin,
                          minU64(unit, begin + per));
    }
    if (!last && !gridBarrier(queue, g, nctas, item.seq, item.callNo, c)) return false;
  }
  // Nothing this CTA pushed through a proxy may land after the call is over.
  return b.flushPorts();
}

}  // namespace tessera::exec
