// Drawing, laying out, issuing and checking one soak op (soak_ops.hpp).
#include "soak_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace soak {
namespace {

size_t elemSize(const OpSpec& s) { return typeInfo(s.dtype).size; }

std::string describe(const OpSpec& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s%s%s count %zu (%zu B drawn) root %d%s%s%s slot %d",
                collName(s.coll), typeInfo(s.dtype).name, reduces(s.coll) ? " " : "",
                reduces(s.coll) ? opName(s.op) : "", s.count, s.bytes, s.root,
                s.inPlace ? " in-place" : "", s.zeroCopy ? " zero-copy" : "",
                s.inGroup ? " in a group" : "", s.slot);
  return buf;
}

void fillReduce(uint8_t* dst, const OpSpec& s, int me, int n, size_t elems) {
  const size_t es = elemSize(s);
  for (size_t i = 0; i < elems; ++i)
    encode(s.dtype, reduceInput(s.seed, me, i, s.dtype, s.op, n), dst + i * es);
}

// Index of the first of n bytes at `got` that differs from rank r's source bytes
// [first, first + n), or n when they all match.
size_t compareCopy(const uint8_t* got, uint64_t seed, int r, size_t first, size_t n) {
  uint8_t want[4096];
  for (size_t done = 0; done < n; done += sizeof want) {
    const size_t len = std::min(sizeof want, n - done);
    fillCopy(want, seed, r, first + done, len);
    if (std::memcmp(got + done, want, len) != 0) {
      for (size_t k = 0; k < len; ++k)
        if (got[done + k] != want[k]) return done + k;
    }
  }
  return n;
}

std::string copyMismatch(const char* where, size_t at, const uint8_t* got, uint64_t seed, int r,
                         size_t first) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: byte %zu is 0x%02x, want 0x%02x (source rank %d)", where, at,
                got[at], copyByte(seed, r, first + at), r);
  return buf;
}

size_t a2avSendExtent(const OpSpec& s, int me, int n) {
  size_t e = 0;
  for (int q = 0; q < n; ++q) {
    const size_t i = static_cast<size_t>(me * n + q);
    e = std::max(e, s.a2avSendDispl[i] + s.a2avCount[i]);
  }
  return e;
}
size_t a2avRecvExtent(const OpSpec& s, int me, int n) {
  size_t e = 0;
  for (int p = 0; p < n; ++p) {
    e = std::max(e, s.a2avRecvDispl[static_cast<size_t>(me * n + p)] +
                        s.a2avCount[static_cast<size_t>(p * n + me)]);
  }
  return e;
}

tsrRedOp_t builtin(OpKind k) {
  switch (k) {
    case OpKind::kProd: return tsrProd;
    case OpKind::kMax: return tsrMax;
    case OpKind::kMin: return tsrMin;
    case OpKind::kAvg: return tsrAvg;
    default: return tsrSum;
  }
}

// An out-of-place call must leave its input as it was: checked on a sample of 16 elements.
std::string checkInputKept(const Prepared& p, int me, int n) {
  const OpSpec& s = *p.spec;
  if (s.inPlace || p.sendbuf == nullptr) return "";
  if (s.coll == Coll::kBroadcast && me != s.root) return "";
  const size_t es = elemSize(s), un = static_cast<size_t>(n);
  size_t elems = s.count;
  if (s.coll == Coll::kReduceScatter || s.coll == Coll::kAlltoAll) elems *= un;
  if (s.coll == Coll::kAlltoAllv) elems = a2avSendExtent(s, me, n);
  if (elems == 0) return "";
  const auto* in = static_cast<const uint8_t*>(p.sendbuf);
  Rng pick{s.seed ^ 0x5eed};
  for (int k = 0; k < 16; ++k) {
    const size_t i = pick.below(elems);
    uint8_t want[8];
    if (reduces(s.coll)) {
      encode(s.dtype, reduceInput(s.seed, me, i, s.dtype, s.op, n), want);
    } else {
      fillCopy(want, s.seed, me, i * es, es);
    }
    if (std::memcmp(in + i * es, want, es) != 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, ": changed its input at element %zu", i);
      return buf;
    }
  }
  return "";
}

}  // namespace

OpSpec drawOp(Rng& rng, int n, Coll coll, long long bytes, bool inGroup, int slot) {
  OpSpec s;
  s.inGroup = inGroup;
  s.slot = slot;
  if (coll == Coll::kNumColls) {
    static constexpr int kWeights[kNumColls] = {16, 10, 10, 10, 10, 8, 8, 10};
    int total = 0;
    for (int w : kWeights) total += w;
    auto x = static_cast<int>(rng.below(static_cast<uint64_t>(total)));
    int c = 0;
    while (x >= kWeights[c]) x -= kWeights[c++];
    coll = static_cast<Coll>(c);
  }
  s.coll = coll;
  s.dtype = static_cast<tsrDataType_t>(rng.below(tsrNumTypes));
  s.op = reduces(coll) ? static_cast<OpKind>(rng.below(6)) : OpKind::kSum;
  if (bytes < 0) {
    // 3% empty, else log-uniform over [1 B, 4 MiB]: the median call moves 2 KiB.
    bytes = rng.chance(0.03) ? 0 : static_cast<long long>(std::exp2(22 * rng.uniform()));
  }
  s.bytes = std::min(static_cast<size_t>(bytes), kMaxBytes);
  const size_t es = elemSize(s), un = static_cast<size_t>(n);
  const bool blocks =
      coll == Coll::kReduceScatter || coll == Coll::kAllGather || coll == Coll::kAlltoAll;
  s.count = s.bytes / es / (blocks ? un : 1);
  const bool canInPlace =
      coll != Coll::kAlltoAll && coll != Coll::kAlltoAllv && coll != Coll::kSendRecv;
  s.inPlace = canInPlace && rng.chance(0.4);
  s.zeroCopy = rng.chance(0.3);
  s.nullUnused = !s.inPlace && rng.chance(0.5);
  s.root = static_cast<int>(rng.below(un));
  s.peer = inGroup ? static_cast<int>(rng.below(un)) : 1 + static_cast<int>(rng.below(un - 1));
  s.sendFirst = rng.chance(0.5);
  s.sendOff = rng.chance(0.3) ? 1 + rng.below(7) : 0;  // elements; varied per rank when laid out
  s.recvOff = rng.chance(0.3) ? 1 + rng.below(7) : 0;
  s.seed = rng.next();
  if (coll == Coll::kAlltoAllv) {
    const size_t budget = s.bytes / es / un;  // per peer: a rank's sends and receives fit
    s.a2avCount.assign(un * un, 0);
    s.a2avSendDispl.assign(un * un, 0);
    s.a2avRecvDispl.assign(un * un, 0);
    for (size_t& c : s.a2avCount) c = rng.chance(0.2) ? 0 : rng.below(budget + 1);
    for (size_t p = 0; p < un; ++p) {
      size_t at = 0;
      for (size_t q = 0; q < un; ++q) {
        at += rng.below(4);  // gaps between blocks
        s.a2avSendDispl[p * un + q] = at;
        at += s.a2avCount[p * un + q];
      }
    }
    std::vector<size_t> order(un);
    for (size_t q = 0; q < un; ++q) {
      for (size_t p = 0; p < un; ++p) order[p] = p;
      for (size_t p = un; p > 1; --p) std::swap(order[p - 1], order[rng.below(p)]);
      size_t at = 0;
      for (size_t p : order) {  // blocks received in a shuffled order, with gaps
        at += rng.below(4);
        s.a2avRecvDispl[q * un + p] = at;
        at += s.a2avCount[p * un + q];
      }
    }
  }
  return s;
}

std::string prepareOp(const OpSpec& s, const Slot& slot, int me, int n, tsrComm_t comm,
                      Prepared* p) {
  *p = Prepared{};
  p->spec = &s;
  const size_t es = elemSize(s), c = s.count, un = static_cast<size_t>(n);
  const auto um = static_cast<size_t>(me);
  auto vary = [&](size_t off) { return off == 0 ? 0 : (off + 3 * um) % 8; };
  uint8_t* S = slot.send + kHead + vary(s.sendOff) * es;
  uint8_t* R = slot.recv + kHead + vary(s.recvOff) * es;
  size_t used = c * es;  // bytes of R the call may write or (in place) read
  switch (s.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: {
      uint8_t* in = s.inPlace ? R : S;
      fillReduce(in, s, me, n, c);
      p->sendbuf = in;
      const bool unused = s.coll == Coll::kReduce && me != s.root && s.nullUnused;
      p->recvbuf = s.inPlace ? R : unused ? nullptr : R;
      break;
    }
    case Coll::kReduceScatter:
      fillReduce(s.inPlace ? R : S, s, me, n, un * c);
      p->sendbuf = s.inPlace ? R : S;
      p->recvbuf = s.inPlace ? R + um * c * es : R;
      if (s.inPlace) used = un * c * es;
      break;
    case Coll::kAllGather:
      if (s.inPlace) {
        fillCopy(R + um * c * es, s.seed, me, 0, c * es);
        p->sendbuf = R + um * c * es;
      } else {
        fillCopy(S, s.seed, me, 0, c * es);
        p->sendbuf = S;
      }
      p->recvbuf = R;
      used = un * c * es;
      break;
    case Coll::kBroadcast:
      if (me == s.root) fillCopy(s.inPlace ? R : S, s.seed, me, 0, c * es);
      p->sendbuf = s.inPlace ? R : (me != s.root && s.nullUnused) ? nullptr : S;
      p->recvbuf = R;
      break;
    case Coll::kAlltoAll:
      fillCopy(S, s.seed, me, 0, un * c * es);
      p->sendbuf = S;
      p->recvbuf = R;
      used = un * c * es;
      break;
    case Coll::kAlltoAllv:
      fillCopy(S, s.seed, me, 0, a2avSendExtent(s, me, n) * es);
      used = a2avRecvExtent(s, me, n) * es;
      std::memset(R, kSentinel, used);  // the gaps between blocks must stay as they are
      p->sendbuf = S;
      p->recvbuf = R;
      break;
    case Coll::kSendRecv:
      if (s.inGroup) {
        p->sendPeer = (me + s.peer) % n;
        p->recvPeer = (me - s.peer + n) % n;
      } else {
        const int partner = me ^ s.peer;
        if (partner >= n) {
          p->participates = false;
          return "";
        }
        p->sendPeer = p->recvPeer = partner;
      }
      fillCopy(S, s.seed, me, 0, c * es);
      p->sendbuf = S;
      p->recvbuf = R;
      break;
    default: return "unknown collective";
  }
  p->usedLo = R;
  p->usedHi = R + used;
  p->guardLo = slot.recv + kHead - 16;
  std::memset(p->guardLo, kSentinel, static_cast<size_t>(p->usedLo - p->guardLo));
  std::memset(p->usedHi, kSentinel, kGuard);
  if (s.op == OpKind::kPreMulSum && reduces(s.coll)) {
    uint8_t scalar[8];
    encode(s.dtype, kPreMulScalar, scalar);
    const tsrResult_t rc =
        tsrRedOpCreatePreMulSum(&p->redOp, scalar, s.dtype, tsrScalarHostImmediate, comm);
    if (rc != tsrSuccess) {
      return describe(s) + ": tsrRedOpCreatePreMulSum: " + tsrGetErrorString(rc) + ": " +
             tsrGetLastError(comm);
    }
    p->ownsRedOp = true;
  } else {
    p->redOp = builtin(s.op);
  }
  return "";
}

tsrResult_t issueOp(const Prepared& p, tsrComm_t comm) {
  const OpSpec& s = *p.spec;
  const size_t c = s.count;
  switch (s.coll) {
    case Coll::kAllReduce:
      return tsrAllReduce(p.sendbuf, p.recvbuf, c, s.dtype, p.redOp, comm, nullptr);
    case Coll::kReduceScatter:
      return tsrReduceScatter(p.sendbuf, p.recvbuf, c, s.dtype, p.redOp, comm, nullptr);
    case Coll::kAllGather: return tsrAllGather(p.sendbuf, p.recvbuf, c, s.dtype, comm, nullptr);
    case Coll::kBroadcast:
      return tsrBroadcast(p.sendbuf, p.recvbuf, c, s.dtype, s.root, comm, nullptr);
    case Coll::kReduce:
      return tsrReduce(p.sendbuf, p.recvbuf, c, s.dtype, p.redOp, s.root, comm, nullptr);
    case Coll::kAlltoAll: return tsrAlltoAll(p.sendbuf, p.recvbuf, c, s.dtype, comm, nullptr);
    case Coll::kAlltoAllv: {
      int me = 0, n = 0;
      tsrCommUserRank(comm, &me);
      tsrCommCount(comm, &n);
      const auto un = static_cast<size_t>(n), um = static_cast<size_t>(me);
      std::vector<size_t> sc(un), sd(un), rc(un), rd(un);
      for (size_t q = 0; q < un; ++q) {
        sc[q] = s.a2avCount[um * un + q];
        sd[q] = s.a2avSendDispl[um * un + q];
        rc[q] = s.a2avCount[q * un + um];
        rd[q] = s.a2avRecvDispl[um * un + q];
      }
      return tsrAlltoAllv(p.sendbuf, sc.data(), sd.data(), p.recvbuf, rc.data(), rd.data(), s.dtype,
                          comm, nullptr);
    }
    case Coll::kSendRecv: {
      if (!p.participates) return tsrSuccess;
      int me = 0;
      tsrCommUserRank(comm, &me);
      const bool sendFirst = s.inGroup ? s.sendFirst : me < p.sendPeer;
      tsrResult_t rc = tsrSuccess;
      for (int step = 0; step < 2 && rc == tsrSuccess; ++step) {
        rc = (step == 0) == sendFirst ? tsrSend(p.sendbuf, c, s.dtype, p.sendPeer, comm, nullptr)
                                      : tsrRecv(p.recvbuf, c, s.dtype, p.recvPeer, comm, nullptr);
      }
      return rc;
    }
    default: return tsrInvalidArgument;
  }
}

std::string checkOp(Prepared& p, int me, int n, bool full, tsrComm_t comm) {
  const OpSpec& s = *p.spec;
  if (p.ownsRedOp) {
    const tsrResult_t rc = tsrRedOpDestroy(p.redOp, comm);
    p.ownsRedOp = false;
    if (rc != tsrSuccess) return describe(s) + ": tsrRedOpDestroy: " + tsrGetErrorString(rc);
  }
  if (!p.participates) return "";
  const size_t es = elemSize(s), c = s.count, un = static_cast<size_t>(n);
  const auto um = static_cast<size_t>(me);
  char buf[320];
  for (const uint8_t* g = p.guardLo; g < p.usedLo; ++g) {
    if (*g != kSentinel) {
      std::snprintf(buf, sizeof buf, ": wrote %td bytes before its output", p.usedLo - g);
      return describe(s) + buf;
    }
  }
  for (size_t k = 0; k < kGuard; ++k) {
    if (p.usedHi[k] != kSentinel) {
      std::snprintf(buf, sizeof buf, ": wrote byte %zu after its output", k);
      return describe(s) + buf;
    }
  }
  if (std::string e = checkInputKept(p, me, n); !e.empty()) return describe(s) + e;
  const auto* R = static_cast<const uint8_t*>(p.recvbuf);
  if (reduces(s.coll)) {
    if (s.coll == Coll::kReduce && me != s.root) return "";
    const size_t base = s.coll == Coll::kReduceScatter ? um * c : 0;  // global element index
    Rng pick{s.seed ^ mix(um + 1)};
    const bool all = full || c <= 4096;
    const size_t checks = all ? c : 1024 + 16;
    for (size_t k = 0; k < checks; ++k) {
      size_t i = k;
      if (!all) i = k < 8 ? k : k < 16 ? c - 1 - (k - 8) : pick.below(c);
      const double got = decode(s.dtype, R + i * es);
      const double want = reduceExpected(s.seed, base + i, s.dtype, s.op, n);
      if (!resultMatches(got, want, s.dtype, s.op)) {
        std::snprintf(buf, sizeof buf, ": element %zu is %.17g, want %.17g", i, got, want);
        return describe(s) + buf;
      }
    }
    return "";
  }
  const size_t blk = c * es;
  size_t at = 0;
  switch (s.coll) {
    case Coll::kAllGather:
    case Coll::kAlltoAll:
      for (int q = 0; q < n; ++q) {
        const size_t first = s.coll == Coll::kAlltoAll ? um * blk : 0;
        const uint8_t* got = R + static_cast<size_t>(q) * blk;
        if ((at = compareCopy(got, s.seed, q, first, blk)) != blk)
          return describe(s) + ": " + copyMismatch("block", at, got, s.seed, q, first);
      }
      return "";
    case Coll::kBroadcast:
      if ((at = compareCopy(R, s.seed, s.root, 0, blk)) != blk)
        return describe(s) + ": " + copyMismatch("output", at, R, s.seed, s.root, 0);
      return "";
    case Coll::kSendRecv:
      if ((at = compareCopy(R, s.seed, p.recvPeer, 0, blk)) != blk)
        return describe(s) + ": " + copyMismatch("received", at, R, s.seed, p.recvPeer, 0);
      return "";
    case Coll::kAlltoAllv: {
      std::vector<std::pair<size_t, size_t>> blocks;  // [begin, end) bytes of R
      for (size_t q = 0; q < un; ++q) {
        const size_t len = s.a2avCount[q * un + um] * es;
        const size_t first = s.a2avSendDispl[q * un + um] * es;
        const uint8_t* got = R + s.a2avRecvDispl[um * un + q] * es;
        if ((at = compareCopy(got, s.seed, static_cast<int>(q), first, len)) != len) {
          return describe(s) + ": " +
                 copyMismatch("block", at, got, s.seed, static_cast<int>(q), first);
        }
        blocks.emplace_back(s.a2avRecvDispl[um * un + q] * es,
                            s.a2avRecvDispl[um * un + q] * es + len);
      }
      std::sort(blocks.begin(), blocks.end());
      size_t from = 0;
      for (const auto& b : blocks) {
        for (size_t j = from; j < b.first; ++j) {
          if (R[j] != kSentinel) {
            std::snprintf(buf, sizeof buf, ": wrote byte %zu, in a gap between blocks", j);
            return describe(s) + buf;
          }
        }
        from = std::max(from, b.second);
      }
      return "";
    }
    default: return "";
  }
}

}  // namespace soak
