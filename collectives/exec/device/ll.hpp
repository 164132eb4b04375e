// The LL protocol of the device executor (DESIGN.md, "Executors"; the buffers are DeviceLL in
// device_plan.hpp). For small calls: a sender writes its payload as 8-byte lines {4 bytes of data,
// 4 bytes of flag = the call's epoch} straight into its slot of every receiver's inbox, each line
// with one 8-byte store (single-copy atomic for an aligned 8-byte store on the GPU; an __atomic
// store on the host), and a receiver polls each line until its flag is the epoch. Data and signal
// travel together: no separate signal round trip, at the price of half the bandwidth.
//
// Epochs and parities. Call e (this CTA's epoch word + 1) uses parity e & 1 of every inbox, and e
// is the flag. Why two parities suffice: a sender writes parity(e + 2) = parity(e) only after it
// finished call e + 1, which needs a line of call e + 1 from every peer (below), and a peer writes
// its call e + 1 lines only after it finished call e, i.e. after it read every line of parity(e)
// that it polls. The invariant "every call, every rank polls at least one line from every peer"
// holds for the symmetric collectives (allreduce, allgather, reducescatter, alltoall: everyone
// sends data to everyone). The rooted ones (broadcast, reduce) keep it with a one-line token sent
// along every pair that carries no data, so mixing rooted and symmetric calls stays safe. "Finished
// call e" is per rank, over all its CTAs: the scheduler (work_queue.hpp) meets at a grid barrier
// after every item. A sender's later stores depend (control) on its polled loads, and no GPU or
// CPU makes a store visible before the loads it depends on returned.
//
// Epoch words: DeviceLL::epoch points to kLLMaxCtas words, one per CTA (every CTA runs every LL
// item, so they stay equal); each CTA's leader reads its own word at the start of an item and
// advances it at the end, so no CTA needs to wait for another to have read a shared word. Flags
// are 32 bits: the host builds a fresh (zeroed) inbox before the epoch reaches kLLEpochLimit, so a
// stale line (an older epoch, or 0) never carries the current flag.
//
// Work split: a payload is cut into units (4 bytes; a whole element for 8-byte types in a reduce);
// CTA c of nctas owns a contiguous range of units, for sending and receiving alike, and its
// threads stride through it. The send phase comes before the receive phase (a CTA sync between),
// so in-place calls are safe: a CTA overwrites only units it has already sent.
#pragma once

#include <stdint.h>
#include <string.h>

#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "collectives/exec/protocols.hpp"
#include "collectives/exec/reduce_kernels.hpp"
#include "collectives/tuner/ll_limits.hpp"
#include "core/datatype.hpp"
#include "tessera/device/atomics.hpp"

namespace tessera::exec {

inline constexpr uint32_t kLLMaxCtas = 64;              // epoch words per rank
inline constexpr uint32_t kLLEpochLimit = 0xFFFFFF00u;  // LL calls per inbox

namespace lldetail {

struct Ctx {
  const WorkQueueHandle* q;
  const WorkItem* item;
  const DeviceLL* ll;
  uint64_t parityOff;  // from an inbox's start to this call's parity
  uint64_t bytes;      // payload bytes per slot
  uint64_t unitBytes;
  uint64_t unitBegin, unitEnd;  // this CTA's units
  uint32_t flag;
  int32_t cta;
  int32_t rank, nranks;
};

TSR_INLINE uint64_t pack(uint32_t word, uint32_t flag) {
  return (static_cast<uint64_t>(flag) << 32) | word;
}

// 4 bytes of a `total`-byte payload at byte `off` (zeros past the end; any alignment).
TSR_INLINE uint32_t readWord(const char* src, uint64_t off, uint64_t total) {
  const char* p = src + off;
  if (off + 4 <= total && (reinterpret_cast<uintptr_t>(p) & 3u) == 0) {
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const uint32_t*>(p);
#else
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
#endif
  }
  uint32_t w = 0;
  for (uint64_t b = 0; b < 4 && off + b < total; ++b)
    w |= static_cast<uint32_t>(static_cast<uint8_t>(p[b])) << (8 * b);
  return w;
}

TSR_INLINE void writeWord(char* dst, uint64_t off, uint64_t total, uint32_t w) {
  char* p = dst + off;
  if (off + 4 <= total && (reinterpret_cast<uintptr_t>(p) & 3u) == 0) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint32_t*>(p) = w;
#else
    memcpy(p, &w, 4);
#endif
    return;
  }
  for (uint64_t b = 0; b < 4 && off + b < total; ++b)
    p[b] = static_cast<char>(static_cast<uint8_t>(w >> (8 * b)));
}

TSR_INLINE const uint64_t* inSlot(const Ctx& c, int32_t from) {
  return reinterpret_cast<const uint64_t*>(c.ll->inbox + c.parityOff +
                                           static_cast<uint64_t>(from) * c.ll->slotBytes);
}
TSR_INLINE uint64_t* outSlot(const Ctx& c, int32_t to) {
  return reinterpret_cast<uint64_t*>(c.ll->peerInbox[to] + c.parityOff +
                                     static_cast<uint64_t>(c.rank) * c.ll->slotBytes);
}

// Polls `line` (from rank `peer`) until it carries this call's flag; false when the queue failed
// or the deadline passed (recorded).
TSR_INLINE bool poll(const Ctx& c, const uint64_t* line, int32_t peer, uint32_t* word) {
  uint64_t v = device::loadRelaxed(line);
  if (static_cast<uint32_t>(v >> 32) != c.flag) {
    const uint64_t start = device::clockNs();
    for (uint32_t iter = 0;; ++iter) {
      device::backoff(iter);
      v = device::loadRelaxed(line);
      if (static_cast<uint32_t>(v >> 32) == c.flag) break;
      if ((iter & 63) == 63) {
        if (queueFailed(*c.q)) return false;
        if (device::clockNs() - start > c.q->timeoutNs) {
          recordStop(*c.q, c.item->seq, c.item->callNo, c.cta, -1, -1, peer);
          return false;
        }
      }
    }
  }
  *word = static_cast<uint32_t>(v);
  return true;
}

// This CTA's words of the payload: [first, end) with stride g.size() from first + g.rank().
TSR_INLINE uint64_t wordBegin(const Ctx& c) { return c.unitBegin * (c.unitBytes / 4); }
TSR_INLINE uint64_t wordEnd(const Ctx& c) {
  const uint64_t end = c.unitEnd * (c.unitBytes / 4), total = (c.bytes + 3) / 4;
  return end < total ? end : total;
}

template <class Group>
TSR_INLINE void sendData(const Ctx& c, const Group& g, int32_t to, const char* src) {
  uint64_t* dst = outSlot(c, to);
  for (uint64_t w = wordBegin(c) + g.rank(); w < wordEnd(c); w += g.size())
    device::storeRelaxed(dst + w, pack(readWord(src, 4 * w, c.bytes), c.flag));
}

template <class Group>
TSR_INLINE bool recvCopy(const Ctx& c, const Group& g, int32_t from, char* dst) {
  const uint64_t* slot = inSlot(c, from);
  for (uint64_t w = wordBegin(c) + g.rank(); w < wordEnd(c); w += g.size()) {
    uint32_t word;
    if (!poll(c, slot + w, from, &word)) return false;
    writeWord(dst, 4 * w, c.bytes, word);
  }
  return true;
}

template <class Group>
TSR_INLINE void localCopy(const Ctx& c, const Group& g, const char* src, char* dst) {
  if (src == dst) return;
  for (uint64_t w = wordBegin(c) + g.rank(); w < wordEnd(c); w += g.size())
    writeWord(dst, 4 * w, c.bytes, readWord(src, 4 * w, c.bytes));
}

template <class T>
TSR_INLINE T fromBits(uint64_t bits) {
  T v;
  memcpy(&v, &bits, sizeof(T));  // little endian: the low bytes
  return v;
}

// Reduces this CTA's units over sources 0..nranks-1 in rank order (own = `own`, the others polled
// from the inbox), the pre-op on every source, the avg post-op, into dst (`count` elements).
template <class T, class Step, class Group>
TSR_INLINE bool reduceUnits(const Ctx& c, const Group& g, const char* own, char* dst,
                            uint64_t count) {
  constexpr uint64_t kUnit = sizeof(T) > 4 ? sizeof(T) : 4;
  constexpr uint32_t kWords = static_cast<uint32_t>(kUnit / 4);
  constexpr uint32_t kElems = static_cast<uint32_t>(kUnit / sizeof(T));
  RedCompute<T> scalar;
  memcpy(&scalar, &c.item->scalarBits, sizeof scalar);
  const bool pre = c.item->preOp != 0, avg = c.item->postAvg != 0;
  for (uint64_t u = c.unitBegin + g.rank(); u < c.unitEnd; u += g.size()) {
    T acc[kElems];
    for (uint32_t j = 0; j < kElems; ++j) acc[j] = fromBits<T>(0);
    for (int32_t s = 0; s < c.nranks; ++s) {
      uint64_t bits = 0;
      for (uint32_t k = 0; k < kWords; ++k) {
        const uint64_t w = u * kWords + k;
        uint32_t word;
        if (s == c.rank) {
          word = readWord(own, 4 * w, c.bytes);
        } else if (!poll(c, inSlot(c, s) + w, s, &word)) {
          return false;
        }
        bits |= static_cast<uint64_t>(word) << (32 * k);
      }
      for (uint32_t j = 0; j < kElems; ++j) {
        T v = fromBits<T>(bits >> (8 * sizeof(T) * j));
        if (pre) v = preOpElem(v, scalar);
        acc[j] = s == 0 ? v : Step::apply(acc[j], v);
      }
    }
    for (uint32_t j = 0; j < kElems; ++j) {
      const uint64_t i = u * kElems + static_cast<uint64_t>(j);
      if (i < count) reinterpret_cast<T*>(dst)[i] = avg ? avgElem(acc[j], c.nranks) : acc[j];
    }
  }
  return true;
}

template <class T, class Group>
struct StepVisit {
  const Ctx& c;
  const Group& g;
  const char* own;
  char* dst;
  template <class Step>
  TSR_INLINE bool operator()(Step) const {
    return reduceUnits<T, Step>(c, g, own, dst, c.item->count);
  }
};

template <class Group>
struct TypeVisit {
  const Ctx& c;
  const Group& g;
  const char* own;
  char* dst;
  template <class T>
  TSR_INLINE bool operator()(T) const {
    return redStepVisit(static_cast<RedKind>(c.item->redKind), StepVisit<T, Group>{c, g, own, dst});
  }
};

template <class Fn>
TSR_INLINE bool dtypeVisit(uint8_t dtype, const Fn& fn) {
  switch (dtype) {
    case tsrInt8: return fn(int8_t{});
    case tsrUint8: return fn(uint8_t{});
    case tsrInt32: return fn(int32_t{});
    case tsrUint32: return fn(uint32_t{});
    case tsrInt64: return fn(int64_t{});
    case tsrUint64: return fn(uint64_t{});
    case tsrFloat16: return fn(Float16{});
    case tsrFloat32: return fn(float{});
    case tsrFloat64: return fn(double{});
    case tsrBfloat16: return fn(BFloat16{});
    case tsrFloat8e4m3: return fn(Float8E4M3{});
    case tsrFloat8e5m2: return fn(Float8E5M2{});
    default: return false;
  }
}

// Whether `from` sends data (not a token) to `to` in this collective.
TSR_INLINE bool carriesData(uint8_t collective, int32_t root, int32_t from, int32_t to) {
  if (collective == kLLBroadcast) return from == root;
  if (collective == kLLReduce) return to == root;
  return true;
}

// The payload `rank` sends to `to`.
TSR_INLINE const char* payloadFor(const Ctx& c, int32_t to) {
  const uint8_t coll = c.item->collective;
  if (coll == kLLReduceScatter || coll == kLLAllToAll)
    return c.item->input + static_cast<uint64_t>(to) * c.bytes;
  return c.item->input;
}

template <class Group>
TSR_INLINE bool receive(const Ctx& c, const Group& g) {
  const WorkItem& it = *c.item;
  const uint8_t coll = it.collective;
  const uint64_t me = static_cast<uint64_t>(c.rank);
  bool ok = true;
  // Tokens: the CTA 0 leader polls line 0 of every slot that carries no data.
  if (c.cta == 0 && g.leader()) {
    for (int32_t s = 0; s < c.nranks && ok; ++s) {
      uint32_t word;
      if (s != c.rank && !carriesData(coll, it.root, s, c.rank))
        ok = poll(c, inSlot(c, s), s, &word);
    }
  }
  if (!ok) return false;
  switch (coll) {
    case kLLAllReduce: return dtypeVisit(it.dtype, TypeVisit<Group>{c, g, it.input, it.output});
    case kLLReduceScatter:
      return dtypeVisit(it.dtype, TypeVisit<Group>{c, g, it.input + me * c.bytes, it.output});
    case kLLReduce:
      return c.rank != it.root || dtypeVisit(it.dtype, TypeVisit<Group>{c, g, it.input, it.output});
    case kLLBroadcast:
      if (c.rank == it.root) {
        localCopy(c, g, it.input, it.output);
        return true;
      }
      return recvCopy(c, g, it.root, it.output);
    default: {  // allgather, alltoall: block s of the output from rank s
      const char* own = coll == kLLAllToAll ? it.input + me * c.bytes : it.input;
      localCopy(c, g, own, it.output + me * c.bytes);
      for (int32_t k = 1; k < c.nranks; ++k) {
        const int32_t s = (c.rank + c.nranks - k) % c.nranks;
        if (!recvCopy(c, g, s, it.output + static_cast<uint64_t>(s) * c.bytes)) return false;
      }
      return true;
    }
  }
}

}  // namespace lldetail

// Runs this CTA's share of a kItemLL item; false (recorded) on failure, in every thread.
template <class Group>
TSR_INLINE bool runLLItem(const WorkQueueHandle& q, const WorkItem& item, const Group& g,
                          uint32_t cta, uint32_t nctas) {
  const DeviceLL& ll = *item.ll;
  const uint64_t esz = dtypeBytes(item.dtype);
  const uint64_t bytes = item.count * esz;
  const bool reduces = item.collective == kLLAllReduce || item.collective == kLLReduceScatter ||
                       item.collective == kLLReduce;
  const bool rooted = item.collective == kLLBroadcast || item.collective == kLLReduce;
  const int32_t icta = static_cast<int32_t>(cta);
  if (esz == 0 || item.collective > kLLAllToAll || ll.nranks < 2 || ll.rank < 0 ||
      ll.rank >= ll.nranks || cta >= kLLMaxCtas ||
      (rooted && (item.root < 0 || item.root >= ll.nranks))) {
    if (g.leader())
      recordError(q, 5 /* tsrInvalidUsage */, kWhyUnsupported, item.seq, item.callNo, icta, -1, -1,
                  -1);
    return false;
  }
  if (bytes == 0 || 2 * ((bytes + 3) / 4) * 4 > ll.slotBytes) {
    if (g.leader())
      recordError(q, 3 /* tsrInternalError */, kWhyBounds, item.seq, item.callNo, icta, -1, -1, -1);
    return false;
  }
  uint32_t e = 0;
  if (g.leader()) e = loadAcquire32(&ll.epoch[cta]) + 1;
  e = g.broadcast(e);

  lldetail::Ctx c{};
  c.q = &q;
  c.item = &item;
  c.ll = &ll;
  c.parityOff = proto::exchangeParity(e) * static_cast<uint64_t>(ll.nranks) * ll.slotBytes;
  c.bytes = bytes;
  c.unitBytes = reduces && esz > 4 ? esz : 4;
  const uint64_t units = (bytes + c.unitBytes - 1) / c.unitBytes;
  c.unitBegin = units * cta / nctas;
  c.unitEnd = units * (cta + 1) / nctas;
  c.flag = e;
  c.cta = icta;
  c.rank = ll.rank;
  c.nranks = ll.nranks;

  // Send: data lines of this CTA's units to every peer (nearest first), or a token line.
  for (int32_t k = 1; k < ll.nranks; ++k) {
    const int32_t to = (ll.rank + k) % ll.nranks;
    if (lldetail::carriesData(item.collective, item.root, ll.rank, to)) {
      lldetail::sendData(c, g, to, lldetail::payloadFor(c, to));
    } else if (cta == 0 && g.leader()) {
      device::storeRelaxed(lldetail::outSlot(c, to), lldetail::pack(0, e));
    }
  }
  g.sync();  // in place: the CTA's units are sent before any of its threads overwrites them
  const bool ok = lldetail::receive(c, g);
  g.sync();  // a thread's failure is recorded before the leader looks
  const bool failed = g.broadcast(g.leader() ? (!ok || queueFailed(q)) : false);
  if (failed) {
    if (g.leader() && device::loadAcquire(&q.error->code) == 0)
      recordStop(q, item.seq, item.callNo, icta, -1, -1, -1);
    return false;
  }
  if (g.leader()) storeRelease32(&ll.epoch[cta], e);
  return true;
}

}  // namespace tessera::exec
