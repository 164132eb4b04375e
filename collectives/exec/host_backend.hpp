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

// A peer's user buffers in a zero-copy call, mapped here.
struct PeerUser {
  char* input = nullptr;
  char* output = nullptr;
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
  exec::SliceLayout layout{};
  Result error = tsrSuccess;  // set when a backend call failed (its sentence is recorded)
  uint64_t written = 0;       // bytes the data ops stored (dst and dst2), for the profile
};

class HostBackend {
 public:
  explicit HostBackend(HostRun& run) : r_(run), bp_(*run.plan) {}

  uint64_t pieceElems(const exec::ExecOp& op, const exec::ExecRef* refs) const {
    if (!bp_.anyUnmapped) return UINT64_MAX;
    bool staged = false;
    for (int i = 0; i < 1 + op.hasDst2 + op.nsrcs; ++i)
      staged = staged || unmapped(refs[op.ref + i]);
    if (!staged) return UINT64_MAX;
    const Bounce& b = r_.engine->bounce();
    uint64_t bytes = loadSlotBytes();
    if (bytes > b.ringBytes / 2) bytes = b.ringBytes / 2;
    uint64_t n = bytes / r_.elemSize;
    return n > 0 ? n : 1;
  }

  const void** srcTable() { return bp_.srcTable.data(); }

  const void* load(const exec::ExecRef& ref, int64_t seg, uint64_t at, uint64_t n, int slot) {
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
    if (!unmapped(ref)) return checked(base(ref, seg), at);
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

 private:
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
