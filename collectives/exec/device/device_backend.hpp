// The device backend of ops.hpp: how one CTA (Group) runs the ops of a plan's workers, resolving
// refs, staging through port channels, with credits, barriers, deadlines and failure.
// __host__ __device__: a CUDA kernel instantiates it with BlockGroup, the host-thread emulation and
// the CPU tests with HostGroup, so the logic the GPU runs is tested on the CPU. The item runner
// that drives it is item_runner.hpp; the copies and reductions are device_reduce.hpp.
#pragma once

#include <stdint.h>
#include <string.h>

#include "collectives/exec/device/copy.hpp"
#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/device_reduce.hpp"
#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "collectives/exec/ops.hpp"
#include "core/datatype.hpp"

namespace tessera::exec {

// Most workers one CTA runs of a plan, most sources of one op (bindDevicePlan refuses plans
// beyond them with a sentence).
inline constexpr int kMaxCtaWorkers = 16;
inline constexpr int kMaxDeviceSrcs = 64;

namespace devdetail {

// tsrResult_t values recorded in the ErrorRecord.
inline constexpr uint64_t kCodeInvalidArgument = 4;
inline constexpr uint64_t kCodeInvalidUsage = 5;
inline constexpr uint64_t kCodeRemoteError = 6;

}  // namespace devdetail

// The Backend of ops.hpp for one CTA (item_runner.hpp drives it). Every thread of the group calls
// every member with the same arguments; data work is split over the threads, and decisions
// (passed, failed) are the leader's, broadcast.
template <class Group>
class DeviceBackend {
 public:
  TSR_INLINE DeviceBackend(const WorkQueueHandle& q, const WorkItem& item, const Group& g,
                           uint32_t cta, uint32_t nctas, const void** table)
      : q_(q),
        item_(item),
        p_(*item.plan),
        g_(g),
        cta_(cta),
        nctas_(nctas),
        table_(table),
        elemSize_(dtypeBytes(item.dtype)) {
    for (int i = 0; i < kMaxCtaWorkers; ++i) target_[i] = 0;
  }

  TSR_INLINE uint64_t elemSize() const { return elemSize_; }
  TSR_INLINE void beginIteration(uint64_t iterOffset) { iterOffset_ = iterOffset; }
  // The op about to run (error reports).
  TSR_INLINE void at(int32_t worker, uint32_t pc) {
    worker_ = worker;
    op_ = p_.planOpIndex != nullptr ? p_.planOpIndex[pc] : -1;
  }

  // Records a failure (leader only; every thread returns the same failure).
  TSR_INLINE void fail(uint64_t code, int32_t why, int32_t peerRank) const {
    if (g_.leader())
      recordError(q_, code, why, item_.seq, item_.callNo, static_cast<int32_t>(cta_), worker_, op_,
                  peerRank);
  }

  // Every move goes through load / combine / commit.
  TSR_INLINE int direct(const ExecOp&, const ExecRef&, int64_t, uint64_t, const ExecRef&, int64_t,
                        uint64_t, uint64_t) {
    return 0;
  }

  TSR_INLINE uint64_t pieceElems(const ExecOp& op, const ExecRef* refs) const {
    if (!p_.anyUnmapped) return UINT64_MAX;
    bool staged = false;
    for (int i = 0; i < 1 + op.hasDst2 + op.nsrcs; ++i)
      staged = staged || unmapped(refs[op.ref + i]);
    if (!staged) return UINT64_MAX;
    // Half the ring: one piece fills while the proxy still reads the one before.
    uint64_t n = p_.stagingBytes / 2 / 16 * 16 / elemSize_;
    return n > 0 ? n : 1;
  }

  TSR_INLINE const void** srcTable() { return table_; }

  TSR_INLINE const void* load(const ExecRef& ref, int64_t seg, uint64_t at, uint64_t n, int) {
    if (unmapped(ref)) {
      fail(devdetail::kCodeInvalidUsage, kWhyUnsupported, p_.peers[ref.peer].rank);
      return nullptr;
    }
    return resolve(ref, seg, at, n);
  }

  TSR_INLINE void* storeTarget(const ExecRef& ref, int64_t seg, uint64_t at, uint64_t n) {
    if (!unmapped(ref)) return resolve(ref, seg, at, n);
    const DevicePeer& peer = p_.peers[ref.peer];
    // Only a dst is sent by commit (ops.hpp): a second staged store (dst2) has no commit.
    if (ref.buffer != kExecScratch || !peer.putPort || p_.staging == nullptr || pending_) {
      fail(devdetail::kCodeInvalidUsage, kWhyUnsupported, peer.rank);
      return nullptr;
    }
    uint64_t need = (n * elemSize_ + 15) / 16 * 16;
    if (need > p_.stagingBytes) {
      fail(devdetail::kCodeInvalidArgument, kWhyBounds, peer.rank);
      return nullptr;
    }
    if (stagePos_ + need > p_.stagingBytes) {
      // The ring wraps: the proxy must have read every staged byte before it is overwritten.
      if (!flushPorts()) return nullptr;
      stagePos_ = 0;
    }
    staged_ = cta_ * p_.stagingBytes + stagePos_;
    stagePos_ += need;
    pending_ = true;
    return p_.staging + staged_;
  }

  TSR_INLINE bool combine(const ExecOp& op, const ExecRef* srcs, void* dst, void* dst2,
                          const void** table, uint64_t n) {
    uint64_t pre = 0;
    if (item_.preOp)
      for (int s = 0; s < op.nsrcs; ++s)
        if (srcs[s].buffer == kExecInput) pre |= 1ull << s;
    if (op.nsrcs == 1 && pre == 0) {
      devdetail::copyPiece(g_, dst, dst2, table[0], n * elemSize_);
    } else {
      devdetail::Piece p{table, op.nsrcs, pre, dst, dst2, n};
      devdetail::reduceDtype(g_, p, item_.dtype, item_.redKind, item_.scalarBits);
    }
    // Every thread's stores are done before a signal, a put, or the next op reads them.
    g_.sync();
    return true;
  }

  TSR_INLINE bool commit(const ExecRef& dst, int64_t seg, uint64_t at, void*, uint64_t n) {
    if (!unmapped(dst)) {
      if (!pending_) return true;
      pending_ = false;  // dst2 was staged: nothing would send it
      fail(devdetail::kCodeInvalidUsage, kWhyUnsupported, -1);
      return false;
    }
    pending_ = false;
    const DevicePeer& peer = p_.peers[dst.peer];
    markDirty(dst.peer);
    uint64_t remote = (static_cast<uint64_t>(seg) * item_.slice + at) * elemSize_;
    bool ok = true;
    if (g_.leader()) {  // combine's sync ordered every thread's staged stores before this
      ok = peer.port.put(remote, staged_, n * elemSize_);
      if (!ok) failPort(&peer.port, peer.rank);
    }
    return g_.broadcast(ok);
  }

  TSR_INLINE bool signal(const ExecOp& op) {
    const DeviceSem& s = p_.sems[op.sem];
    g_.sync();
    if (s.mapped) {
      if (g_.leader()) s.handle.signal();
      return true;
    }
    // Through the semaphore's own port channel (its signal adds to this semaphore's counter at
    // the peer). It shares the proxy FIFO and connection with the peer's put port, so puts this
    // CTA pushed before land first.
    const int32_t rank = p_.peers[s.peerSlot].rank;
    markDirty(s.peerSlot);
    bool ok = true;
    if (g_.leader()) {
      ok = s.hasPort && s.port.signal();
      if (!ok) failPort(s.hasPort ? &s.port : nullptr, rank);
    }
    return g_.broadcast(ok);
  }

  TSR_INLINE StepResult tryWait(const ExecOp& op) {
    int got = 0;
    if (g_.leader()) {
      DeviceSem& s = p_.sems[op.sem];
      if (s.credits > 0) {
        --s.credits;
        got = 1;
      } else {
        got = s.handle.poll() ? 1 : 0;
      }
    }
    return g_.broadcast(got) ? StepResult::kDone : StepResult::kBlocked;
  }

  TSR_INLINE bool flush(const ExecOp& op) {
    const DevicePeer& peer = p_.peers[op.peer];
    g_.sync();
    if (peer.mapped) {
#if defined(__CUDA_ARCH__)
      if (g_.leader()) __threadfence_system();
#endif
      return true;
    }
    bool ok = true;
    if (g_.leader()) {
      ok = peer.hasPort && peer.port.flush();
      if (!ok) failPort(peer.hasPort ? &peer.port : nullptr, peer.rank);
    }
    if (op.peer < 64) dirty_ &= ~(1ull << op.peer);
    return g_.broadcast(ok);
  }

  // Barrier counts are monotonic over calls: a worker arrives by raising its own count once, and
  // passes when every worker's count has reached its own.
  TSR_INLINE StepResult tryBarrier(int worker) {
    g_.sync();  // this CTA's stores are ordered before the leader's release below
    int passed = 0;
    if (g_.leader()) {
      uint32_t& target = target_[(static_cast<uint32_t>(worker) - cta_) / nctas_];
      if (target == 0) {
        uint32_t* mine = &p_.barrierCounts[worker];
        target = loadAcquire32(mine) + 1;
        storeRelease32(mine, target);
      }
      passed = 1;
      for (int32_t w = 0; w < p_.workers && passed; ++w)
        passed = loadAcquire32(&p_.barrierCounts[w]) >= target ? 1 : 0;
      if (passed) target = 0;
    }
    return g_.broadcast(passed) ? StepResult::kDone : StepResult::kBlocked;
  }

  // Waits until the proxy carried out every put and signal this CTA pushed (ring wrap, end of
  // the item). False (recorded) when a flush failed.
  TSR_INLINE bool flushPorts() {
    bool ok = true;
    if (g_.leader() && (dirty_ != 0 || dirtyAll_)) {
      for (int32_t s = 0; s < p_.npeers; ++s) {
        const DevicePeer& peer = p_.peers[s];
        bool used = dirtyAll_ || (s < 64 && ((dirty_ >> s) & 1) != 0);
        if (!used || peer.mapped || !peer.hasPort) continue;
        if (!peer.port.flush()) {
          failPort(&peer.port, peer.rank);
          ok = false;
          break;
        }
      }
    }
    dirty_ = 0;
    dirtyAll_ = false;
    return g_.broadcast(ok);
  }

 private:
  TSR_INLINE bool unmapped(const ExecRef& ref) const {
    return p_.anyUnmapped && ref.peer >= 0 && !p_.peers[ref.peer].mapped;
  }

  TSR_INLINE void markDirty(int32_t slot) {
    if (slot < 64)
      dirty_ |= 1ull << slot;
    else
      dirtyAll_ = true;
  }

  // Records why an operation on `port` (nullptr: there is none) to rank `peerRank` failed.
  TSR_INLINE void failPort(const device::PortChannelDeviceHandle* port, int32_t peerRank) const {
    uint64_t code = port != nullptr ? device::loadAcquire(port->fifo.error) : 0;
    if (code != 0)
      fail(code, kWhyPort, peerRank);
    else if (port != nullptr)
      fail(devdetail::kCodeInvalidArgument, kWhyBounds, peerRank);  // the range did not fit
    else
      fail(devdetail::kCodeInvalidUsage, kWhyUnsupported, peerRank);
  }

  // Where element `at` of the ref's segment `seg` of this iteration lies (HostBackend::base).
  TSR_INLINE char* resolve(const ExecRef& ref, int64_t seg, uint64_t at, uint64_t n) const {
    const auto s = static_cast<uint64_t>(seg);
    char* base;
    if (ref.buffer == kExecScratch) {
      uint64_t bytes = p_.scratchBytes;
      base = p_.scratch;
      if (ref.peer >= 0) {
        base = p_.peers[ref.peer].scratch;
        bytes = p_.peers[ref.peer].scratchBytes;
      }
      uint64_t off = (s * item_.slice + at) * elemSize_;
      if (base != nullptr && device::rangeFits(off, n * elemSize_, bytes)) return base + off;
    } else {
      bool in = ref.buffer == kExecInput;
      if (ref.peer < 0) {
        base = in ? const_cast<char*>(item_.input) : item_.output;
      } else {
        const int32_t r = p_.peers[ref.peer].rank;
        if (item_.board != nullptr) {
          // What the peer published for this call (WorkItem::board), after its signal.
          const PeerPointers& pp = item_.board[r];
          base = reinterpret_cast<char*>(
              device::loadRelaxed(reinterpret_cast<const uint64_t*>(in ? &pp.input : &pp.output)));
        } else {
          // A window's entry for the peer's rank, at this rank's offset (WorkItem::peerInput).
          char* const* table = in ? item_.peerInput : item_.peerOutput;
          base = table == nullptr ? nullptr : table[r];
          if (base != nullptr) base += in ? item_.peerInputOffset : item_.peerOutputOffset;
        }
      }
      if (base != nullptr) return base + (s * item_.count + iterOffset_ + at) * elemSize_;
    }
    fail(devdetail::kCodeInvalidArgument, kWhyBounds, ref.peer >= 0 ? p_.peers[ref.peer].rank : -1);
    return nullptr;
  }

  const WorkQueueHandle& q_;
  const WorkItem& item_;
  const DevicePlan& p_;
  const Group& g_;
  uint32_t cta_;
  uint32_t nctas_;
  const void** table_;
  uint64_t elemSize_;
  uint64_t iterOffset_ = 0;
  int32_t worker_ = -1;
  int32_t op_ = -1;
  // Staging ring of this CTA: next free byte, the pending staged store's offset from
  // DevicePlan::staging, whether a storeTarget awaits its commit, peers pushed to since the last
  // flush (slots >= 64: dirtyAll_).
  uint64_t stagePos_ = 0;
  uint64_t staged_ = 0;
  bool pending_ = false;
  bool dirtyAll_ = false;
  uint64_t dirty_ = 0;
  // Leader only: per local worker, the barrier count it waits for (0: not at a barrier).
  uint32_t target_[kMaxCtaWorkers];
};

}  // namespace tessera::exec
