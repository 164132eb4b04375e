// The device backend of ops.hpp and the item runner of the device executor's scheduler
// (work_queue.hpp): how one CTA (Group) runs its share of a WorkItem. __host__ __device__: a CUDA
// kernel instantiates it with BlockGroup, the host-thread emulation and the CPU tests with
// HostGroup, so the logic the GPU runs (ref resolution, staging through port channels, credits,
// barriers, iterations, deadlines, failure) is tested on the CPU.
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
#include <string.h>

#include "collectives/exec/device/copy.hpp"
#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/ll.hpp"
#include "collectives/exec/device/p2p.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "collectives/exec/ops.hpp"
#include "collectives/exec/reduce_kernels.hpp"
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

// The premulsum scalar from WorkItem::scalarBits (little end first), as a bit copy.
template <class T>
TSR_INLINE RedCompute<T> scalarOf(uint64_t bits) {
  RedCompute<T> c;
  unsigned char b[sizeof(c)];
  for (unsigned i = 0; i < sizeof(c); ++i) b[i] = static_cast<unsigned char>(bits >> (8 * i));
  memcpy(&c, b, sizeof(c));
  return c;
}

// One combine: dst (and dst2) <- srcs[0] op ... op srcs[nsrcs - 1]; bit s of `pre`: source s
// takes the premulsum pre-op.
struct Piece {
  const void* const* srcs;
  int nsrcs;
  uint64_t pre;
  void* dst;
  void* dst2;
  uint64_t n;
};

// reduceAt of reduce_kernels.hpp with the pre-op flags as a bit mask.
template <class Step, class T>
TSR_INLINE T elemAt(const Piece& p, RedCompute<T> scalar, uint64_t i) {
  T acc = static_cast<const T*>(p.srcs[0])[i];
  if (p.pre & 1) acc = preOpElem(acc, scalar);
  for (int s = 1; s < p.nsrcs; ++s) {
    T x = static_cast<const T*>(p.srcs[s])[i];
    if ((p.pre >> s) & 1) x = preOpElem(x, scalar);
    acc = Step::apply(acc, x);
  }
  return acc;
}

template <class Step, class T>
TSR_INLINE void reduceElems(const Piece& p, RedCompute<T> scalar, uint64_t begin, uint64_t end,
                            uint64_t stride) {
  T* d = static_cast<T*>(p.dst);
  T* d2 = static_cast<T*>(p.dst2);
  for (uint64_t i = begin; i < end; i += stride) {
    const T v = elemAt<Step, T>(p, scalar, i);
    d[i] = v;
    if (d2 != nullptr) d2[i] = v;
  }
}

#if defined(__CUDA_ARCH__)
// 16-byte words of a piece whose pointers are all 16-byte aligned, each thread whole words.
template <class Step, class T>
__device__ void reduceWords(const Piece& p, RedCompute<T> scalar, uint64_t words, uint32_t tid,
                            uint32_t nthreads) {
  constexpr int kPer = static_cast<int>(16 / sizeof(T));
  for (uint64_t w = tid; w < words; w += nthreads) {
    T acc[kPer];
    uint4 u = __ldcg(static_cast<const uint4*>(p.srcs[0]) + w);
    memcpy(acc, &u, 16);
    if (p.pre & 1) {
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] = preOpElem(acc[j], scalar);
    }
    for (int s = 1; s < p.nsrcs; ++s) {
      T x[kPer];
      u = __ldcg(static_cast<const uint4*>(p.srcs[s]) + w);
      memcpy(x, &u, 16);
      const bool pre = (p.pre >> s) & 1;
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        acc[j] = Step::apply(acc[j], pre ? preOpElem(x[j], scalar) : x[j]);
    }
    memcpy(&u, acc, 16);
    static_cast<uint4*>(p.dst)[w] = u;
    if (p.dst2 != nullptr) static_cast<uint4*>(p.dst2)[w] = u;
  }
}
#endif

template <class Step, class T, class Group>
TSR_INLINE void reducePiece(const Group& g, const Piece& p, RedCompute<T> scalar) {
#if defined(__CUDA_ARCH__)
  constexpr uint64_t kPer = 16 / sizeof(T);
  bool vec = aligned16(p.dst) && aligned16(p.dst2);
  for (int s = 0; s < p.nsrcs && vec; ++s) vec = aligned16(p.srcs[s]);
  uint64_t words = vec ? p.n / kPer : 0;
  reduceWords<Step, T>(p, scalar, words, g.rank(), g.size());
  reduceElems<Step, T>(p, scalar, words * kPer + g.rank(), p.n, g.size());
#else
  uint64_t begin, end;
  hostBlock(g, p.n, &begin, &end);
  reduceElems<Step, T>(p, scalar, begin, end, 1);
#endif
}

// On the GPU each datatype's reduction is its own function: inlined into the op loop, the 48
// (datatype, op) variants made the interpreter spill under the 128-register bound.
#if defined(__CUDA_ARCH__)
#define TSR_REDUCE_NOINLINE __noinline__
#else
#define TSR_REDUCE_NOINLINE
#endif

template <class T, class Group>
TSR_HOST_DEVICE TSR_REDUCE_NOINLINE void reduceTyped(const Group& g, const Piece& p, uint8_t kind,
                                                     uint64_t scalarBits) {
  const RedCompute<T> scalar = scalarOf<T>(scalarBits);
  switch (static_cast<RedKind>(kind)) {
    case RedKind::kProd: reducePiece<RedStepProd, T>(g, p, scalar); return;
    case RedKind::kMax: reducePiece<RedStepMax, T>(g, p, scalar); return;
    case RedKind::kMin: reducePiece<RedStepMin, T>(g, p, scalar); return;
    default: reducePiece<RedStepSum, T>(g, p, scalar); return;  // sum, avg, premulsum
  }
}

template <class Group>
TSR_INLINE void reduceDtype(const Group& g, const Piece& p, uint8_t dtype, uint8_t kind,
                            uint64_t bits) {
  switch (dtype) {
    case tsrInt8: reduceTyped<int8_t>(g, p, kind, bits); return;
    case tsrUint8: reduceTyped<uint8_t>(g, p, kind, bits); return;
    case tsrInt32: reduceTyped<int32_t>(g, p, kind, bits); return;
    case tsrUint32: reduceTyped<uint32_t>(g, p, kind, bits); return;
    case tsrInt64: reduceTyped<int64_t>(g, p, kind, bits); return;
    case tsrUint64: reduceTyped<uint64_t>(g, p, kind, bits); return;
    case tsrFloat16: reduceTyped<Float16>(g, p, kind, bits); return;
    case tsrFloat32: reduceTyped<float>(g, p, kind, bits); return;
    case tsrFloat64: reduceTyped<double>(g, p, kind, bits); return;
    case tsrBfloat16: reduceTyped<BFloat16>(g, p, kind, bits); return;
    case tsrFloat8e4m3: reduceTyped<Float8E4M3>(g, p, kind, bits); return;
    case tsrFloat8e5m2: reduceTyped<Float8E5M2>(g, p, kind, bits); return;
    default: return;  // refused before the item runs (dtypeBytes == 0)
  }
}

// buf[begin, end) /= nranks, this thread's share.
template <class T, class Group>
TSR_INLINE void avgTyped(const Group& g, char* buf, int nranks, uint64_t begin, uint64_t end) {
#if defined(__CUDA_ARCH__)
  avgRange(reinterpret_cast<T*>(buf), nranks, begin + g.rank(), end, g.size());
#else
  uint64_t b, e;
  hostBlock(g, end - begin, &b, &e);
  avgRange(reinterpret_cast<T*>(buf), nranks, begin + b, begin + e, 1);
#endif
}

template <class Group>
TSR_INLINE void avgDtype(const Group& g, uint8_t dtype, char* buf, int nranks, uint64_t begin,
                         uint64_t end) {
  switch (dtype) {
    case tsrInt8: avgTyped<int8_t>(g, buf, nranks, begin, end); return;
    case tsrUint8: avgTyped<uint8_t>(g, buf, nranks, begin, end); return;
    case tsrInt32: avgTyped<int32_t>(g, buf, nranks, begin, end); return;
    case tsrUint32: avgTyped<uint32_t>(g, buf, nranks, begin, end); return;
    case tsrInt64: avgTyped<int64_t>(g, buf, nranks, begin, end); return;
    case tsrUint64: avgTyped<uint64_t>(g, buf, nranks, begin, end); return;
    case tsrFloat16: avgTyped<Float16>(g, buf, nranks, begin, end); return;
    case tsrFloat32: avgTyped<float>(g, buf, nranks, begin, end); return;
    case tsrFloat64: avgTyped<double>(g, buf, nranks, begin, end); return;
    case tsrBfloat16: avgTyped<BFloat16>(g, buf, nranks, begin, end); return;
    case tsrFloat8e4m3: avgTyped<Float8E4M3>(g, buf, nranks, begin, end); return;
    case tsrFloat8e5m2: avgTyped<Float8E5M2>(g, buf, nranks, begin, end); return;
    default: return;
  }
}

}  // namespace devdetail

// The Backend of ops.hpp for one CTA (see the contract above). Every thread of the group calls
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
      if (ref.peer < 0)
        base = in ? const_cast<char*>(item_.input) : item_.output;
      else
        base = item_.peerUser == nullptr ? nullptr
               : in                      ? item_.peerUser[ref.peer].input
                                         : item_.peerUser[ref.peer].output;
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
