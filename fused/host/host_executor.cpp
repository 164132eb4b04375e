// The host fused executor's workspace and signalling (host_executor.hpp): connections, the
// collective re-baseline when the layout changes, waits with deadlines, puts and signals, and the
// end of a call (done credits).
#include "fused/host/host_executor.hpp"

#include <cstdarg>
#include <cstring>

#include "core/datatype.hpp"
#include "core/deadline.hpp"
#include "core/log.hpp"
#include "tessera/device/atomics.hpp"
#include "transport/context.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

// The cuda kinds move GPU memory; host buffers reach the same peers through their host
// counterparts (as the collective engine's host executor does).
TransportKind hostKind(TransportKind k) {
  if (k == TransportKind::kCudaIpc) return TransportKind::kShm;
  if (k == TransportKind::kP2p) return TransportKind::kInproc;
  return k;
}

// Names of the leading words of a LayoutKey, for the sentence when ranks disagree.
const char* const kKeyNames[] = {"op",          "atomic flag", "M",      "N (or K)", "input type",
                                 "output type", "tile M",      "tile N", "comm M",   "comm N"};
constexpr size_t kKeyParams = sizeof kKeyNames / sizeof kKeyNames[0];

// What ranks exchange at a re-baseline.
struct Hello {
  LayoutKey key;
  uint64_t needBytes;
  uint64_t haveBytes;
  uint64_t unmappedPeers;
};

}  // namespace

Result HostFusedExecutor::create(const FusedOptions& options,
                                 std::unique_ptr<HostFusedExecutor>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "HostFusedExecutor::create: out is NULL");
  TransportContext* ctx = options.transports;
  if (ctx == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "HostFusedExecutor::create: no TransportContext");
  if (options.rank != ctx->rank() || options.nranks != ctx->nranks())
    return TSR_FAIL(tsrInvalidArgument,
                    "HostFusedExecutor::create: rank %d of %d, but the transport context is rank "
                    "%d of %d",
                    options.rank, options.nranks, ctx->rank(), ctx->nranks());
  if (!(options.timeoutSeconds > 0))
    return TSR_FAIL(tsrInvalidArgument,
                    "HostFusedExecutor::create: timeout %g s: every wait needs a positive deadline",
                    options.timeoutSeconds);
  out->reset(new HostFusedEngine(options));
  return tsrSuccess;
}

HostFusedEngine::HostFusedEngine(const FusedOptions& options)
    : ctx_(options.transports),
      rank_(options.rank),
      nranks_(options.nranks),
      timeout_(options.timeoutSeconds),
      cfg_(hostTileConfig()) {}

HostFusedEngine::~HostFusedEngine() {
  // A peer's last write into this workspace in a call is its end-of-call credit (done[peer]). Wait,
  // within the deadline, until every peer's credits count every call, so that no peer's put or
  // atomic add reaches freed memory (over ucx, its flush would then fail at the peer). After a
  // failure the counts no longer agree, and a peer that died never sends them: free at once.
  if (!mem_ || !haveLayout_ || callIndex_ == 0 || broken_ != tsrSuccess) return;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    if (waitAtLeast(layout_.doneOf(static_cast<uint32_t>(p)), callIndex_, p,
                    "peer %d's end-of-call credits before its workspace is freed", p) != tsrSuccess)
      break;
  }
}

uint64_t HostFusedEngine::workspaceBytes() const { return mem_ ? mem_->size() : 0; }

Result HostFusedEngine::setup(const FusedCall& call, CallSetup* out) const {
  if (cfg_.tileM == 0 || cfg_.tileN == 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: fused tiles of %u x %u: tile sizes must be positive", rank_,
                    cfg_.tileM, cfg_.tileN);
  const FusedShape& s = call.shape;
  const auto n = static_cast<uint32_t>(nranks_);
  // The scheduler counts tiles in 32 bits.
  if ((s.m / n + cfg_.tileM - 1) / cfg_.tileM > UINT32_MAX ||
      (s.n + cfg_.tileN - 1) / cfg_.tileN > UINT32_MAX)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: fused M=%llu N=%llu with %u x %u tiles: more than 2^32 tile rows or "
                    "columns",
                    rank_, static_cast<unsigned long long>(s.m),
                    static_cast<unsigned long long>(s.n), cfg_.tileM, cfg_.tileN);
  const bool gather = call.op == FusedOp::kAllGatherGemm;
  out->sched = TileScheduler::make(call.op, static_cast<uint32_t>(rank_), n, s.m, s.n, cfg_);
  const auto inBytes = static_cast<uint32_t>(dtypeSize(call.inType));
  const auto outBytes = static_cast<uint32_t>(dtypeSize(call.outType));
  out->layout = workspaceLayout(out->sched, s.k, inBytes, outBytes, call.atomic, true);

  const WorkspaceLayout& l = out->layout;
  const TileConfig& c = out->sched.cfg;
  LayoutKey k{};
  size_t i = 0;
  for (uint64_t v : {uint64_t{static_cast<uint8_t>(call.op)},
                     uint64_t{call.atomic},
                     s.m,
                     gather ? s.k : s.n,
                     uint64_t{static_cast<uint32_t>(call.inType)},
                     uint64_t{static_cast<uint32_t>(call.outType)},
                     uint64_t{c.tileM},
                     uint64_t{c.tileN},
                     uint64_t{c.commM},
                     uint64_t{c.commN},
                     l.tileCounters,
                     l.gatherFlags,
                     l.done,
                     l.tileConsumed,
                     l.gatherConsumed,
                     l.partials,
                     l.gather,
                     l.staging,
                     l.total,
                     uint64_t{l.slots},
                     uint64_t{l.numTileCounters},
                     uint64_t{l.numGatherFlags},
                     l.tileFloats,
                     l.slotBytes,
                     l.gatherBytes,
                     l.stagingBytes,
                     uint64_t{l.gatherElemBytes},
                     l.gatherRowBytes})
    k[i++] = v;
  out->key = k;
  return tsrSuccess;
}

Result HostFusedEngine::fail(Result code) {
  if (broken_ == tsrSuccess) {
    broken_ = code;
    brokenWhy_ = lastErrorMessage();
  }
  return code;
}

Result HostFusedEngine::run(const FusedCall& call) {
  CallSetup cs;
  TSR_CHECK(setup(call, &cs));
  TSR_CHECK(ensureLayout(call, cs));
  opName_ = fusedOpName(call.op);
  credited_.assign(static_cast<size_t>(nranks_), 0);
  Result r = call.op == FusedOp::kAllGatherGemm ? runAllGather(call, cs) : runReduce(call, cs);
  if (r == tsrSuccess) r = finishCall();
  return r == tsrSuccess ? r : fail(r);
}

Result HostFusedEngine::reserve(const FusedCall& call) {
  CallSetup cs;
  TSR_CHECK(setup(call, &cs));
  return ensureLayout(call, cs);
}

Result HostFusedEngine::ensureLayout(const FusedCall& call, const CallSetup& cs) {
  if (broken_ != tsrSuccess)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: an earlier fused call failed (%s: %s); its peers' counters no longer "
                    "match this rank's, so the executor (communicator) must be destroyed",
                    rank_, resultName(broken_), brokenWhy_.c_str());
  if (haveLayout_ && cs.key == key_) return tsrSuccess;
  return rebaseline(call, cs);
}

Result HostFusedEngine::connectPeers() {
  const auto n = static_cast<size_t>(nranks_);
  conns_.assign(n, nullptr);
  remote_.assign(n, nullptr);
  unmapped_.clear();
  // Bootstrap sends never wait for the receiver, so every rank may connect in rank order.
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    TransportKind kind;
    std::string why;
    TSR_CHECK(ctx_->selectTransport(p, &kind, &why));
    auto& c = conns_[static_cast<size_t>(p)];
    TSR_CHECK(ctx_->connect(p, hostKind(kind), &c, kHostFusedTag));
    if (!c->mapsMemory()) unmapped_.push_back(c.get());
  }
  connected_ = true;
  return tsrSuccess;
}

// Every rank finished the previous call and flushed before the allGather returns anywhere, so
// between it and the final barrier no peer touches this rank's workspace: it may be replaced and
// its words zeroed. Disagreements found in the allGather are seen by every rank alike, so they
// fail everywhere without leaving the ranks out of step.
Result HostFusedEngine::rebaseline(const FusedCall& call, const CallSetup& cs) {
  haveLayout_ = false;
  if (!connected_) {
    Result r = connectPeers();
    if (r != tsrSuccess) return fail(r);
  }
  for (Connection* c : unmapped_) {
    Result r = c->flush();
    if (r != tsrSuccess) return fail(r);
  }
  std::vector<Hello> all(static_cast<size_t>(nranks_));
  Hello& mine = all[static_cast<size_t>(rank_)];
  mine.key = cs.key;
  mine.needBytes = cs.layout.total;
  mine.haveBytes = workspaceBytes();
  mine.unmappedPeers = unmapped_.size();
  Result r = ctx_->bootstrap().allGather(all.data(), sizeof(Hello));
  if (r != tsrSuccess) return fail(r);

  bool grow = false;
  for (int q = 0; q < nranks_; ++q) {
    const Hello& h = all[static_cast<size_t>(q)];
    if (h.key != cs.key) {
      size_t i = 0;
      while (i < h.key.size() && h.key[i] == cs.key[i]) ++i;
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: fused %s call: rank %d's call differs in its %s (%llu here, %llu "
                      "there); every rank must make the same fused calls",
                      rank_, fusedOpName(call.op), q, i < kKeyParams ? kKeyNames[i] : "tile grid",
                      static_cast<unsigned long long>(cs.key[i]),
                      static_cast<unsigned long long>(h.key[i]));
    }
    if (call.atomic && h.unmappedPeers > 0)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: fused %s: atomic accumulation (TSR_FUSED_ATOMIC) adds into peers' "
                      "memory through a mapping, but rank %d reaches %llu peer(s) over a transport "
                      "that does not map memory (ucx); use the deterministic mode",
                      rank_, fusedOpName(call.op), q,
                      static_cast<unsigned long long>(h.unmappedPeers));
    grow = grow || h.haveBytes < h.needBytes;
  }

  if (grow) {
    // Nobody writes here until the barrier below; the old region goes before the new one comes.
    remote_.assign(static_cast<size_t>(nranks_), nullptr);
    mem_.reset();
    base_ = nullptr;
    r = ctx_->allocate(cs.layout.total, MemoryKind::kHost, &mem_);
    if (r != tsrSuccess) return fail(r);
    base_ = static_cast<char*>(mem_->data());
    for (int p = 0; p < nranks_; ++p) {
      if (p == rank_) continue;
      auto i = static_cast<size_t>(p);
      r = ctx_->exchangeMemory(*conns_[i], *mem_, &remote_[i], kHostFusedTag);
      if (r != tsrSuccess) return fail(r);
    }
    TSR_INFO("rank %d: fused workspace of %llu bytes", rank_,
             static_cast<unsigned long long>(cs.layout.total));
  }
  // Counters, consumed words, done credits and the atomic slot start from zero.
  std::memset(base_, 0, cs.layout.total);
  r = ctx_->bootstrap().barrier();
  if (r != tsrSuccess) return fail(r);
  key_ = cs.key;
  layout_ = cs.layout;
  haveLayout_ = true;
  callIndex_ = 0;
  stagingPending_.fill(nullptr);
  nextStaging_ = 0;
  return tsrSuccess;
}

Result HostFusedEngine::waitAtLeast(uint64_t offset, uint64_t target, int peer, const char* fmt,
                                    ...) {
  const uint64_t* w = word(offset);
  if (device::loadAcquire(w) >= target) return tsrSuccess;
  std::string what;
  {
    va_list ap;
    va_start(ap, fmt);
    what = vstrprintf(fmt, ap);
    va_end(ap);
  }
  const ContextState& state = *ctx_->state();
  Deadline deadline = Deadline::after(timeout_);
  auto lastCheck = Clock::now();
  for (uint32_t iter = 0;; ++iter) {
    uint64_t have = device::loadAcquire(w);
    if (have >= target) return tsrSuccess;
    // Over emulated UCX lanes a peer's puts complete only when this side progresses.
    for (Connection* c : unmapped_) c->progress();
    if ((iter & 31) == 31) {
      if (state.aborted.load(std::memory_order_acquire))
        return TSR_FAIL(
            tsrRemoteError,
            "rank %d: fused %s call %llu: wait for %s interrupted: the communicator was "
            "aborted",
            rank_, opName_, static_cast<unsigned long long>(callIndex_), what.c_str());
      auto now = Clock::now();
      if (now - lastCheck > std::chrono::milliseconds(20)) {
        lastCheck = now;
        for (int p = 0; p < nranks_; ++p) {
          if (p == rank_ || (peer >= 0 && p != peer)) continue;
          Result r = conns_[static_cast<size_t>(p)]->peerStatus();
          if (r != tsrSuccess)
            return addContext(r, "rank %d: fused %s call %llu, waiting for %s from peer %d", rank_,
                              opName_, static_cast<unsigned long long>(callIndex_), what.c_str(),
                              p);
        }
      }
      if (deadline.expired()) {
        std::string from = peer >= 0 ? strprintf("peer %d", peer) : std::string("its peers");
        return TSR_FAIL(tsrTimeout,
                        "rank %d: fused %s call %llu: waited %.3g s for %s from %s; the counter is "
                        "at %llu of %llu",
                        rank_, opName_, static_cast<unsigned long long>(callIndex_), timeout_,
                        what.c_str(), from.c_str(), static_cast<unsigned long long>(have),
                        static_cast<unsigned long long>(target));
      }
    }
    device::backoff(iter);
  }
}

Result HostFusedEngine::credit(int peer) {
  auto p = static_cast<size_t>(peer);
  if (peer == rank_ || credited_[p]) return tsrSuccess;
  TSR_CHECK(waitAtLeast(layout_.doneOf(static_cast<uint32_t>(peer)), callIndex_, peer,
                        "the end of call %llu (the credit to write into its workspace)",
                        static_cast<unsigned long long>(callIndex_ - 1)));
  credited_[p] = 1;
  return tsrSuccess;
}

Result HostFusedEngine::put(int peer, uint64_t dst, uint64_t src, uint64_t bytes) {
  if (peer == rank_) {
    std::memmove(at(dst), at(src), bytes);
    return tsrSuccess;
  }
  auto p = static_cast<size_t>(peer);
  return conns_[p]->put(*remote_[p], dst, *mem_, src, bytes);
}

Result HostFusedEngine::signal(int peer, uint64_t offset) {
  if (peer == rank_) {
    device::fetchAddRelease(word(offset), 1);
    return tsrSuccess;
  }
  auto p = static_cast<size_t>(peer);
  return conns_[p]->atomicAdd(*remote_[p], offset, 1);
}

Result HostFusedEngine::takeStaging(uint32_t* slot) {
  uint32_t s = nextStaging_;
  nextStaging_ = (s + 1) % kStagingTiles;
  if (Connection* c = stagingPending_[s]) {
    // An RDMA put may still read this tile; one flush completes every put on that connection.
    TSR_CHECK(c->flush());
    for (Connection*& pending : stagingPending_)
      if (pending == c) pending = nullptr;
  }
  *slot = s;
  return tsrSuccess;
}

void HostFusedEngine::noteStagingPut(uint32_t slot, int peer) {
  if (peer != rank_ && !conns_[static_cast<size_t>(peer)]->mapsMemory())
    stagingPending_[slot] = conns_[static_cast<size_t>(peer)].get();
}

Result HostFusedEngine::finishCall() {
  // This rank read everything peers wrote for this call: they may write the next one.
  for (int j = 1; j < nranks_; ++j)
    TSR_CHECK(signal((rank_ + j) % nranks_, layout_.doneOf(static_cast<uint32_t>(rank_))));
  // Sources of puts (staging, gather regions) change in the next call.
  for (Connection* c : unmapped_) TSR_CHECK(c->flush());
  stagingPending_.fill(nullptr);
  ++callIndex_;
  return tsrSuccess;
}

}  // namespace tessera::fused
