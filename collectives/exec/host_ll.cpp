// The host LL protocol (engine_impl.hpp, "HostLL"): small all-reduce, all-gather and
// reduce-scatter calls between ranks of one host whose peers are all mapped (inproc, shm), with
// data and flag in the same cache line, so that a message costs the receiver one line transfer per
// 56 bytes instead of the data's lines plus a semaphore's (the Simple plans' put, signal, wait).
//
// Lines: 64 bytes, 56 of payload and a 64-bit flag last. The sender stores the payload, then the
// flag (release) = the call's LL sequence number; the receiver polls the flag (acquire) and then
// reads the payload of that line. Sequence numbers only grow, so a line of an older call never
// passes for a new one.
//
// Inboxes: every rank has, per sender, two parities of kHostLLLines lines; call s writes parity
// s % 2. Every rank sends to every peer in every LL call (the three collectives are symmetric),
// so when a rank starts call s it has received every peer's call s-1, which each peer sent only
// after it had read everything of call s-2: the parity a sender overwrites is never still being
// read. Calls of one engine take turns, so one LL call runs at a time.
//
// Waiting: the receiver polls the lines; to park it sleeps on a doorbell semaphore per peer,
// which the sender signals after its lines (a signal nobody waits for stays in the sender's cache:
// the receiver reads the doorbell only when it parks).
//
// Reduction: the peers' payloads are unpacked into contiguous staging, then reduced with the
// call's op in rank order 0..n-1 (so results equal the oneshot plan's: canonical order).
#include <algorithm>
#include <cstring>

#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/host_ops.hpp"
#include "collectives/exec/protocols.hpp"
#include "collectives/exec/recycled.hpp"
#include "core/datatype.hpp"
#include "core/park.hpp"
#include "tessera/device/atomics.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr size_t kLine = 64;
constexpr size_t kPayload = 56;

size_t linesFor(size_t bytes) { return std::max<size_t>(1, (bytes + kPayload - 1) / kPayload); }

uint64_t* flagOf(char* line) { return reinterpret_cast<uint64_t*>(line + kPayload); }

class LLOperation final : public TurnOperation, public Recycled<LLOperation, 4> {
 public:
  using Recycled<LLOperation, 4>::operator new;
  using Recycled<LLOperation, 4>::operator delete;
  LLOperation(EngineImpl* e, const CollCall& call, uint64_t callNo)
      : TurnOperation(e), call_(call), callNo_(callNo) {
    const size_t elem = dtypeSize(call.dtype);
    // Bytes each rank sends each peer (and receives from each).
    block_ = call.count * elem;
    n_ = e->nranks();
    rank_ = e->rank();
  }

  ~LLOperation() override {
    if (!done_ && failed_ == tsrSuccess) e_->abandoned(describe());
  }

  Result progress(bool* done) override {
    if (Result r; !inTurn(done, &r)) return r;
    HostLL& ll = e_->hostLL();
    if (!sent_) {
      llSeq_ = ++ll.calls;
      send(ll);
      sent_ = true;
      markMoved();
    }
    bool all = true;
    for (int k = 1; k < n_; ++k) {
      int q = (rank_ + n_ - k) % n_;  // the ranks that sent first come first
      if (got_[q]) continue;
      if (receive(ll, q)) {
        got_[q] = 1;
        markMoved();
      } else {
        all = false;
      }
    }
    if (!all) {
      if (moved_) {
        EngineImpl::busy(&idle_);
        return tsrSuccess;
      }
      if (Result r = e_->idle(&idle_, *this); r != tsrSuccess) return failInTurn(r);
      return tsrSuccess;
    }
    if (Result r = finish(ll); r != tsrSuccess) return failInTurn(r);
    done_ = true;
    e_->endTurn();
    *done = true;
    markMoved();
    return tsrSuccess;
  }

  std::string describe() const override {
    return strprintf("%s LL count=%zu %s (call %llu)", collectiveName(call_.collective),
                     call_.count, dtypeName(call_.dtype), static_cast<unsigned long long>(callNo_));
  }

  const std::vector<int>* dumpPeers() const override { return e_->peerPids(); }
  std::string blocked() const override {
    std::string head = describe() + strprintf(": rank %d ", rank_);
    if (std::string earlier = waitsForEarlier(head); !earlier.empty()) return earlier;
    std::string who;
    for (int q = 0; q < n_; ++q)
      if (q != rank_ && !got_[q])
        who += strprintf("%s%d (%zu of %zu lines)", who.empty() ? "" : ", ", q, seen_[q],
                         linesFor(block_));
    return head + "waits for the lines of rank(s) " + who;
  }

  Result checkPeers() const override {
    const HostLL& ll = e_->hostLL();
    for (int q = 0; q < n_; ++q)
      if (q != rank_ && !got_[q])
        TSR_CHECK(ll.peers[static_cast<size_t>(q)].connection->peerStatus());
    return tsrSuccess;
  }

  bool parkWords(ParkSet* set) const override {
    if (!waitingInTurn() || !sent_) return true;
    const HostLL& ll = e_->hostLL();
    for (int q = 0; q < n_; ++q) {
      if (q != rank_ && !got_[q] && !ll.peers[static_cast<size_t>(q)].doorbell->addParkWord(set))
        return false;
    }
    return true;
  }

 private:
  // The bytes of the payload this rank sends to rank q.
  const char* payloadFor(int q) const {
    const char* in = static_cast<const char*>(call_.sendbuf);
    return call_.collective == Collective::kReduceScatter ? in + static_cast<size_t>(q) * block_
                                                          : in;
  }

  void send(HostLL& ll) {
    size_t lines = linesFor(block_);
    size_t parity = proto::exchangeParity(llSeq_);
    for (int k = 1; k < n_; ++k) {
      int q = (rank_ + k) % n_;  // each rank starts with a different peer
      HostLL::Peer& p = ll.peers[static_cast<size_t>(q)];
      char* box = p.inbox + (static_cast<size_t>(rank_) * proto::kExchangeParities + parity) *
                                ll.linesPerBox * kLine;
      const char* src = payloadFor(q);
      for (size_t i = 0; i < lines; ++i) {
        size_t at = i * kPayload;
        size_t n = std::min(kPayload, block_ > at ? block_ - at : 0);
        char* line = box + i * kLine;
        std::memcpy(line, src + at, n);
        device::storeRelease(flagOf(line), llSeq_);
      }
      p.doorbellHandle.signal();
    }
  }

  // Whether every line of rank q's message arrived; unpacks it into its place when it did.
  bool receive(HostLL& ll, int q) {
    size_t lines = linesFor(block_);
    size_t parity = proto::exchangeParity(llSeq_);
    char* box = ll.inbox + (static_cast<size_t>(q) * proto::kExchangeParities + parity) *
                               ll.linesPerBox * kLine;
    size_t& seen = seen_[q];
    while (seen < lines) {
      if (device::loadAcquire(flagOf(box + seen * kLine)) != llSeq_) return false;
      ++seen;
    }
    char* dst = call_.collective == Collective::kAllGather
                    ? static_cast<char*>(call_.recvbuf) + static_cast<size_t>(q) * block_
                    : ll.staging + static_cast<size_t>(q) * ll.payloadBytes;
    for (size_t i = 0; i < lines; ++i) {
      size_t at = i * kPayload;
      std::memcpy(dst + at, box + i * kLine, std::min(kPayload, block_ - at));
    }
    return true;
  }

  Result finish(HostLL& ll) {
    char* out = static_cast<char*>(call_.recvbuf);
    if (call_.collective == Collective::kAllGather) {
      const char* mine = static_cast<const char*>(call_.sendbuf);
      char* slot = out + static_cast<size_t>(rank_) * block_;
      if (slot != mine) std::memcpy(slot, mine, block_);
      return tsrSuccess;
    }
    // Sum (or the op) in rank order; this rank's own part comes from its input.
    const void* srcs[kHostLLMaxRanks];
    uint8_t pre[kHostLLMaxRanks];
    for (int q = 0; q < n_; ++q) {
      srcs[q] = q == rank_ ? static_cast<const void*>(payloadFor(rank_))
                           : ll.staging + static_cast<size_t>(q) * ll.payloadBytes;
      pre[q] = 1;  // every source is input: the pre-op (premulsum) applies to all
    }
    bool premul = call_.op.kind == RedKind::kPreMulSum;
    HostReduceArgs a{call_.op, call_.dtype, srcs,       n_, premul ? pre : nullptr,
                     out,      nullptr,     call_.count};
    TSR_CHECK(hostReduce(a));
    if (call_.op.kind == RedKind::kAvg)
      TSR_CHECK(hostPostOp(call_.op, call_.dtype, out, call_.count, n_));
    return tsrSuccess;
  }

  CollCall call_;
  uint64_t callNo_;
  uint64_t llSeq_ = 0;
  size_t block_ = 0;
  int n_ = 1, rank_ = 0;
  bool sent_ = false;
  uint8_t got_[kHostLLMaxRanks] = {};
  size_t seen_[kHostLLMaxRanks] = {};  // lines of each peer's message found so far
};

}  // namespace

bool EngineImpl::hostLLFits(const CollCall& call) const {
  if (call.collective != Collective::kAllReduce && call.collective != Collective::kAllGather &&
      call.collective != Collective::kReduceScatter)
    return false;
  if (nranks_ > kHostLLMaxRanks || !call.algorithm.empty() || call.plan) return false;
  // One host, every peer mapped: the agreed intra-host class (the slowest pair's) says so alike
  // on every rank.
  if (!options_.hostOf.empty())
    for (int h : options_.hostOf)
      if (h != options_.hostOf[0]) return false;
  if (intraHost_ != TransportKind::kInproc && intraHost_ != TransportKind::kShm) return false;
  size_t block = call.count * dtypeSize(call.dtype);
  if (block > kHostLLMaxPayload) return false;
  const ProtoFilter& proto = planner_.tuner().proto();
  if (!proto.allows(call.collective, Protocol::kLL)) return false;
  if (!proto.allows(call.collective, Protocol::kSimple)) return true;  // LL forced
  // TESSERA_ALGO names the families to run (tessera_tune and perf/tuner_check.sh measure each
  // that way): the LL exchange is none of them.
  if (planner_.tuner().filter().restricts(call.collective)) return false;
  return callBytes(call, nranks_) <= kHostLLDefaultMaxBytes &&
         block * static_cast<size_t>(nranks_ - 1) <= kHostLLDefaultMaxBytes;
}

Result EngineImpl::ensureHostLL() {
  if (hostLL_.ready) return tsrSuccess;
  HostLL& ll = hostLL_;
  ll.linesPerBox = linesFor(kHostLLMaxPayload);
  ll.payloadBytes = (kHostLLMaxPayload + 63) / 64 * 64;
  size_t boxBytes = ll.linesPerBox * kLine;
  TSR_CHECK(ctx_->allocate(static_cast<size_t>(nranks_) * proto::kExchangeParities * boxBytes,
                           MemoryKind::kHost, &ll.memory));
  ll.inbox = static_cast<char*>(ll.memory->data());
  std::memset(ll.inbox, 0, static_cast<size_t>(nranks_) * proto::kExchangeParities * boxBytes);
  ll.stagingMemory.assign(static_cast<size_t>(nranks_) * ll.payloadBytes, 0);
  ll.staging = ll.stagingMemory.data();
  ll.peers.resize(static_cast<size_t>(nranks_));
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    HostLL::Peer& peer = ll.peers[static_cast<size_t>(p)];
    TSR_CHECK(connection(p, &peer.connection));
    if (!peer.connection->mapsMemory())
      return TSR_FAIL(tsrInternalError, "rank %d: the LL protocol needs rank %d mapped", rank_, p);
    TSR_CHECK(
        ctx_->exchangeMemory(*peer.connection, *ll.memory, &peer.remote, kEngineTransportTag));
    TSR_CHECK(ctx_->createSemaphore(peer.connection, &peer.doorbell, kEngineTransportTag));
    peer.inbox = static_cast<char*>(peer.remote->mapped());
    peer.doorbellHandle = peer.doorbell->deviceHandle();
  }
  ll.ready = true;
  TSR_INFO("rank %d: host LL inboxes ready (%zu lines per sender and parity)", rank_,
           ll.linesPerBox);
  return tsrSuccess;
}

Result makeHostLLOperation(EngineImpl* engine, const CollCall& call, uint64_t callNo,
                           std::unique_ptr<Operation>* out) {
  *out = std::make_unique<LLOperation>(engine, call, callNo);
  return tsrSuccess;
}

}  // namespace tessera
