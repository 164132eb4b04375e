// The host backend of ops.hpp: refs resolve to the caller's buffers, this rank's scratch, or a
// peer's memory mapped here (inproc, shm); peers that are not mapped (ucx) are reached by
// Connection::get / put through the engine's staging memory. Semaphores of mapped peers are
// signalled and polled through their device handles (one atomic each), the others through the
// Semaphore object (a put-ordered atomicAdd). Host only; header so the executor inlines it.
#pragma once

#include <cstdint>

#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/host_ops.hpp"
#include "collectives/exec/ops.hpp"

namespace tessera {

// A peer's user buffers in a zero-copy call: mapped here, or (cross != null) addresses in the
// peer's process reached by cross-memory attach through that connection.
struct PeerUser {
  char* input = nullptr;
  char* output = nullptr;
  uint64_t inputAddr = 0;
  uint64_t outputAddr = 0;
  Connection* cross = nullptr;
};

// Everything one iteration of one call needs to resolve refs.
struct HostRun {
  EngineImpl* engine = nullptr;
  BoundPlan* plan = nullptr;
  const char* input = nullptr;
  char* output = nullptr;
  uint64_t count = 0;  // elements per user segment
  uint64_t elemSize = 1;
  uint64_t slice = 0;       // elements per scratch segment
  uint64_t iterOffset = 0;  // first element of this iteration inside each user segment
  tsrDataType_t dtype = tsrFloat32;
  RedOpDesc op;
  bool preOp = false;  // the op has a pre-op (premulsum), applied to input sources
  const PeerUser* peerUser = nullptr;
  bool cross = false;  // peerUser entries are reached by cross-memory attach
  exec::SliceLayout layout{};
  Result error = tsrSuccess;  // set when a backend call failed (its sentence is recorded)
  uint64_t written = 0;       // bytes the data ops stored (dst and dst2), for the profile
};

class HostBackend {
 public:
  explicit HostBackend(HostRun& run) : r_(run), bp_(*run.plan) {}

  uint64_t pieceElems(const exec::ExecOp& op, const exec::ExecRef* refs) const {
    if (!bp_.anyUnmapped && !r_.cross) return UINT64_MAX;
    bool staged = false;
    for (int i = 0; i < 1 + op.hasDst2 + op.nsrcs; ++i)
      staged = staged || unmapped(refs[op.ref + i]) || crossRef(refs[op.ref + i]);
    if (!staged) return UINT64_MAX;
    // A copy between a peer's buffer and this rank's memory is one kernel copy (direct()), as
    // long as it likes; other moves stage through the bounce memory, a slot at a time.
    if (r_.cross && op.nsrcs == 1 && !op.hasDst2 && !preOpOn(refs[op.ref + 1]) &&
        crossRef(refs[op.ref]) != crossRef(refs[op.ref + 1]) && !unmapped(refs[op.ref]) &&
        !unmapped(refs[op.ref + 1]))
      return UINT64_MAX;
    const Bounce& b = r_.engine->bounce();
    uint64_t bytes = loadSlotBytes();
    if (bytes > b.ringBytes / 2) bytes = b.ringBytes / 2;
    uint64_t n = bytes / r_.elemSize;
    return n > 0 ? n : 1;
  }

  const void** srcTable() { return bp_.srcTable.data(); }

  const void* load(const exec::ExecRef& ref, int64_t seg, uint64_t at, uint64_t n, int slot) {
    if (crossRef(ref)) {
      const Bounce& b = r_.engine->bounce();
      size_t offset = static_cast<size_t>(slot) * loadSlotBytes();
      const PeerUser& u = r_.peerUser[ref.peer];
      Result res =
          u.cross->readPeerAddress(b.base + offset, crossAddr(ref, seg, at), n * r_.elemSize);
      if (res != tsrSuccess) return fail(res);
      return b.base + offset;
    }
    if (!unmapped(ref)) return checked(base(ref, seg), at);
    const Bounce& b = r_.engine->bounce();
    size_t offset = static_cast<size_t>(slot) * loadSlotBytes();
    PeerLink& p = bp_.peers[static_cast<size_t>(ref.peer)];
    if (ref.buffer != exec::kExecScratch || !p.scratch) return fail(unreachable(ref));
    Result res =
        p.connection->get(*b.memory, offset, *p.scratch, remoteOffset(seg, at), n * r_.elemSize);
    if (res != tsrSuccess) return fail(res);
    return b.base + offset;
  }

  void* storeTarget(const exec::ExecRef& ref, int64_t seg, uint64_t at, uint64_t n) {
    if (!unmapped(ref) && !crossRef(ref)) return checked(base(ref, seg), at);
    size_t offset = 0;
    Result res = r_.engine->stageStore(n * r_.elemSize, &offset);
    if (res != tsrSuccess) return fail(res);
    staged_ = offset;
    return r_.engine->bounce().base + offset;
  }

  bool combine(const exec::ExecOp& op, const exec::ExecRef* srcs, void* dst, void* dst2,
               const void** table, uint64_t n) {
    r_.written += n * r_.elemSize * (dst2 != nullptr ? 2 : 1);
    bool pre = false;
    if (r_.preOp) {
      for (int s = 0; s < op.nsrcs; ++s) {
        bp_.preOpTable[static_cast<size_t>(s)] = srcs[s].buffer == exec::kExecInput ? 1 : 0;
        pre = pre || srcs[s].buffer == exec::kExecInput;
      }
    }
    if (op.nsrcs == 1 && !pre) {
      hostCopyBytes(dst, dst2, table[0], n * r_.elemSize);
      return true;
    }
    if (n <= kTinyElems && op.nsrcs <= kTinySrcs) {
      tinyReduce(table, op.nsrcs, pre ? bp_.preOpTable.data() : nullptr, dst, dst2, n);
      return true;
    }
    HostReduceArgs a{r_.op, r_.dtype, table, op.nsrcs, pre ? bp_.preOpTable.data() : nullptr,
                     dst,   dst2,     n};
    Result res = hostReduce(a);
    if (res != tsrSuccess) r_.error = res;
    return res == tsrSuccess;
  }

  bool commit(const exec::ExecRef& dst, int64_t seg, uint64_t at, void* /*staged*/, uint64_t n) {
    if (crossRef(dst)) {
      const PeerUser& u = r_.peerUser[dst.peer];
      Result res = u.cross->writePeerAddress(crossAddr(dst, seg, at),
                                             r_.engine->bounce().base + staged_, n * r_.elemSize);
      return res == tsrSuccess || fail(res) != nullptr;
    }
    if (!unmapped(dst)) return true;
    PeerLink& p = bp_.peers[static_cast<size_t>(dst.peer)];
    if (dst.buffer != exec::kExecScratch || !p.scratch) return fail(unreachable(dst)) != nullptr;
    Bounce& b = r_.engine->bounce();
    Result res =
        p.connection->put(*p.scratch, remoteOffset(seg, at), *b.memory, staged_, n * r_.elemSize);
    if (res != tsrSuccess) return fail(res) != nullptr;
    r_.engine->markDirty(p.connection.get());
    return true;
  }

  bool signal(const exec::ExecOp& op) {
    SemLink& s = bp_.sems[static_cast<size_t>(op.sem)];
    if (bp_.peers[static_cast<size_t>(s.peerSlot)].mapped) {
      s.handle.signal();
      return true;
    }
    Result res = s.semaphore->signal();
    if (res != tsrSuccess) r_.error = res;
    r_.engine->markDirty(s.semaphore->connection().get());
    return res == tsrSuccess;
  }

  exec::StepResult tryWait(const exec::ExecOp& op) {
    SemLink& s = bp_.sems[static_cast<size_t>(op.sem)];
    if (s.credits > 0) {
      --s.credits;
      return exec::StepResult::kDone;
    }
    bool got =
        bp_.peers[static_cast<size_t>(s.peerSlot)].mapped ? s.handle.poll() : s.semaphore->poll();
    return got ? exec::StepResult::kDone : exec::StepResult::kBlocked;
  }

  bool flush(const exec::ExecOp& op) {
    PeerLink& p = bp_.peers[static_cast<size_t>(op.peer)];
    if (p.mapped) return true;  // stores to a mapping are complete once issued
    Result res = p.connection->flush();
    if (res != tsrSuccess) r_.error = res;
    return res == tsrSuccess;
  }

  exec::StepResult tryBarrier(int worker) {
    auto w = static_cast<size_t>(worker);
    if (!bp_.atBarrier[w]) {
      bp_.atBarrier[w] = 1;
      ++bp_.barriers[w];
    }
    for (uint32_t n : bp_.barriers)
      if (n < bp_.barriers[w]) return exec::StepResult::kBlocked;
    bp_.atBarrier[w] = 0;
    return exec::StepResult::kDone;
  }

  // One kernel copy between a peer's buffer (cross-memory attach) and this rank's memory.
  int direct(const exec::ExecOp& /*op*/, const exec::ExecRef& src, int64_t sseg, uint64_t sat,
             const exec::ExecRef& dst, int64_t dseg, uint64_t dat, uint64_t n) {
    if (!r_.cross || preOpOn(src)) return 0;
    bool fromPeer = crossRef(src), toPeer = crossRef(dst);
    if (fromPeer == toPeer || unmapped(src) || unmapped(dst)) return 0;
    Result res;
    if (fromPeer) {
      char* d = checked(base(dst, dseg), dat);
      if (d == nullptr) return -1;
      res = r_.peerUser[src.peer].cross->readPeerAddress(d, crossAddr(src, sseg, sat),
                                                         n * r_.elemSize);
    } else {
      const char* s = checked(base(src, sseg), sat);
      if (s == nullptr) return -1;
      res = r_.peerUser[dst.peer].cross->writePeerAddress(crossAddr(dst, dseg, dat), s,
                                                          n * r_.elemSize);
    }
    r_.written += n * r_.elemSize;
    if (res != tsrSuccess) {
      r_.error = res;
      return -1;
    }
    return 1;
  }

 private:
  // A peer's input or output reached by cross-memory attach.
  bool crossRef(const exec::ExecRef& ref) const {
    return r_.cross && ref.peer >= 0 && ref.buffer != exec::kExecScratch &&
           r_.peerUser[ref.peer].cross != nullptr;
  }
  // Whether the call's pre-op (premulsum) applies to what `src` loads: then it must go through
  // combine.
  bool preOpOn(const exec::ExecRef& src) const {
    return r_.preOp && src.buffer == exec::kExecInput;
  }
  // The address in the peer's process of element `at` of the ref's segment `seg`.
  uint64_t crossAddr(const exec::ExecRef& ref, int64_t segment, uint64_t at) const {
    const PeerUser& u = r_.peerUser[ref.peer];
    uint64_t b = ref.buffer == exec::kExecInput ? u.inputAddr : u.outputAddr;
    return b + (static_cast<uint64_t>(segment) * r_.count + r_.iterOffset + at) * r_.elemSize;
  }

  bool unmapped(const exec::ExecRef& ref) const {
    return bp_.anyUnmapped && ref.peer >= 0 && !bp_.peers[static_cast<size_t>(ref.peer)].mapped;
  }

  // Element 0 of the ref's segment `seg` in this iteration.
  char* base(const exec::ExecRef& ref, int64_t segment) const {
    auto seg = static_cast<uint64_t>(segment);
    if (ref.buffer == exec::kExecScratch) {
      char* b =
          ref.peer < 0 ? bp_.scratchBase : bp_.peers[static_cast<size_t>(ref.peer)].scratchMapped;
      return b == nullptr ? nullptr : b + seg * r_.slice * r_.elemSize;
    }
    char* b;
    if (ref.peer < 0) {
      b = ref.buffer == exec::kExecInput ? const_cast<char*>(r_.input) : r_.output;
    } else {
      const PeerUser& u = r_.peerUser[ref.peer];
      b = ref.buffer == exec::kExecInput ? u.input : u.output;
    }
    return b == nullptr ? nullptr : b + (seg * r_.count + r_.iterOffset) * r_.elemSize;
  }

  // Unmapped peers are reached only in their scratch (zero-copy needs mapped peers).
  size_t remoteOffset(int64_t seg, uint64_t at) const {
    return static_cast<size_t>((static_cast<uint64_t>(seg) * r_.slice + at) * r_.elemSize);
  }

  char* checked(char* base, uint64_t at) {
    if (base != nullptr) return base + at * r_.elemSize;
    if (r_.error == tsrSuccess) r_.error = nullBuffer();
    return nullptr;
  }

  char* fail(Result res) {
    r_.error = res;
    return nullptr;
  }

  // Each source of a staged op gets one load slot of this size (a multiple of 64 bytes).
  uint64_t loadSlotBytes() const {
    return r_.engine->bounce().loadBytes / bp_.srcTable.size() / 64 * 64;
  }

  // Small reductions skip hostReduce's checks and SIMD setup: the same element functions
  // (reduce_kernels.hpp) in a plain loop, the call's op and datatype known valid
  // (host_executor.cpp).
  static constexpr uint64_t kTinyElems = 8;
  static constexpr int kTinySrcs = 8;
  void tinyReduce(const void** srcs, int nsrcs, const uint8_t* pre, void* dst, void* dst2,
                  uint64_t n) const;

  // Error sentences (host_executor.cpp).
  Result nullBuffer() const;
  Result unreachable(const exec::ExecRef& ref) const;

  HostRun& r_;
  BoundPlan& bp_;
  size_t staged_ = 0;
};

}  // namespace tessera
