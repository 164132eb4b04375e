// Binding plans to transport resources (engine_impl.hpp): connections (one per peer, kept by the
// engine), each plan's scratch and semaphores, the zero-copy control region, point-to-point
// links, the staging memory for peers that are not mapped, and the transports the tuner assumes.
//
// Setup is pairwise over the bootstrap. A rank sets up its pairs in increasing peer order, which
// is the global order of pairs (min rank, max rank) restricted to its own; bootstrap sends never
// wait for the receiver, so a rank blocked on a pair waits only for a peer that is busy with an
// earlier pair, and the earliest pending pair always has both ranks at it: no deadlock, whatever
// the number of peers. Within a pair everything goes in one fixed order on both sides.
#include <cstring>
#include <iterator>

#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/protocols.hpp"
#include "core/hash.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr size_t kMaxBlobBytes = 1 << 20;
constexpr size_t kBounceLoadBytes = 1 << 20;
constexpr size_t kBounceRingBytes = 1 << 20;

// What two ranks compare before they share a plan's resources.
struct PlanHello {
  uint64_t fingerprint;
  uint64_t scratchBytes;
};

}  // namespace

Result EngineImpl::connection(int peer, std::shared_ptr<Connection>* out) {
  auto& slot = connections_[static_cast<size_t>(peer)];
  if (!slot) {
    TransportKind kind;
    std::string why;
    TSR_CHECK(ctx_->selectTransport(peer, &kind, &why));
    std::shared_ptr<Connection> c;
    TSR_CHECK(ctx_->connect(peer, hostTransportKind(kind), &c, kEngineTransportTag));
    if (!c->mapsMemory()) unmapped_.push_back(c);
    slot = std::move(c);
  }
  *out = slot;
  return tsrSuccess;
}

// The tuner must see the same inputs on every rank, or ranks pick different plans and hang. Each
// class (a peer on the same host, on another host) takes the slowest transport any pair of ranks
// uses: every rank finds the slowest over its own peers with the very selection its connections
// use (placements, this process's environment and topology), and one allGather spreads them, so
// per-process differences (TESSERA_TRANSPORT, TESSERA_P2P_LEVEL, GPU paths seen from other
// hosts) cannot split the ranks.
Result EngineImpl::agreeTransportClasses() {
  TSR_CHECK(agreeClasses(true, &intraHost_, &interHost_));
  if (!tunerAgreed_) TSR_CHECK(agreeTuner());
  classesAgreed_ = true;
  TSR_INFO("rank %d: the tuner sees %s within a host and %s between hosts", rank_,
           transportName(intraHost_), transportName(interHost_));
  return tsrSuccess;
}

// Every rank must decide from the same tuner: one file (a host's cached file may differ from
// another host's) and the same filters. Collective (the first tuned call, host or device).
Result EngineImpl::agreeTuner() {
  std::vector<uint64_t> digests(2 * static_cast<size_t>(nranks_));
  digests[2 * static_cast<size_t>(rank_)] = planner_.tuner().fileDigest();
  digests[2 * static_cast<size_t>(rank_) + 1] = planner_.tuner().filterDigest();
  TSR_CHECK(ctx_->bootstrap().allGather(digests.data(), 2 * sizeof(uint64_t)));
  bool sameFile = true;
  for (int p = 0; p < nranks_; ++p) {
    if (digests[2 * static_cast<size_t>(p) + 1] != digests[1])
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: rank %d's TESSERA_ALGO, TESSERA_PROTO or TESSERA_DETERMINISTIC "
                      "differs from rank 0's: every rank must choose the same plans",
                      rank_, p);
    sameFile = sameFile && digests[2 * static_cast<size_t>(p)] == digests[0];
  }
  if (!sameFile) {
    if (rank_ == 0)
      TSR_WARN(
          "the ranks' tuner files differ (this one's: %s): every rank uses the built-in "
          "parameters instead; give them one TESSERA_TUNER_FILE",
          planner_.tuner().source().c_str());
    planner_.tuner().useDefaults();
  }
  TSR_INFO("rank %d: tuner parameters from %s%s", rank_, planner_.tuner().source().c_str(),
           planner_.tuner().table() != nullptr ? " (with measurements)" : "");
  tunerAgreed_ = true;
  return tsrSuccess;
}

// `hostKinds`: the kinds the host executor connects with (cuda kinds mapped to their host
// counterparts); else the device executor's (the kinds selected). *intra / *inter keep their
// value where no pair of ranks is of that class.
Result EngineImpl::agreeClasses(bool hostKinds, TransportKind* intra, TransportKind* inter) {
  constexpr uint8_t kNone = 0xff;
  auto slowness = [](TransportKind k) -> uint8_t {
    switch (k) {
      case TransportKind::kInproc: return 0;
      case TransportKind::kP2p: return 1;
      case TransportKind::kCudaIpc: return 2;
      case TransportKind::kShm: return 3;
      case TransportKind::kUcx: return 4;
    }
    return 4;
  };
  const TransportKind bySlowness[] = {TransportKind::kInproc, TransportKind::kP2p,
                                      TransportKind::kCudaIpc, TransportKind::kShm,
                                      TransportKind::kUcx};
  // [rank][0: same host, 1: other host]
  std::vector<uint8_t> slowest(2 * static_cast<size_t>(nranks_), kNone);
  uint8_t* mine = &slowest[2 * static_cast<size_t>(rank_)];
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    TransportKind k;
    std::string why;
    // A peer nothing reaches fails when a plan connects to it, with this sentence.
    if (ctx_->selectTransport(p, &k, &why) != tsrSuccess) continue;
    bool same = options_.hostOf.empty() || options_.hostOf[static_cast<size_t>(p)] ==
                                               options_.hostOf[static_cast<size_t>(rank_)];
    uint8_t s = slowness(hostKinds ? hostTransportKind(k) : k);
    uint8_t& slot = mine[same ? 0 : 1];
    if (slot == kNone || s > slot) slot = s;
  }
  clearLastError();
  TSR_CHECK(ctx_->bootstrap().allGather(slowest.data(), 2));
  uint8_t agreed[2] = {kNone, kNone};
  for (size_t i = 0; i < slowest.size(); ++i) {
    uint8_t s = slowest[i];
    if (s != kNone && s >= std::size(bySlowness))
      return TSR_FAIL(tsrInternalError, "rank %d: rank %zu sent transport class %u", rank_, i / 2,
                      s);
    if (s != kNone && (agreed[i % 2] == kNone || s > agreed[i % 2])) agreed[i % 2] = s;
  }
  if (agreed[0] != kNone) *intra = bySlowness[agreed[0]];
  if (agreed[1] != kNone) *inter = bySlowness[agreed[1]];
  return tsrSuccess;
}

Result EngineImpl::sendBlob(int peer, int tag, const Memory* memory) {
  std::string blob;
  if (memory != nullptr) TSR_CHECK(memory->serialize(&blob));
  uint64_t len = blob.size();
  Bootstrap& b = ctx_->bootstrap();
  TSR_CHECK(b.send(peer, kEngineTagBase + tag, &len, sizeof len));
  if (len > 0) TSR_CHECK(b.send(peer, kEngineTagBase + tag, blob.data(), blob.size()));
  return tsrSuccess;
}

Result EngineImpl::recvBlob(int peer, int tag, std::string* blob) {
  uint64_t len = 0;
  Bootstrap& b = ctx_->bootstrap();
  TSR_CHECK(b.recv(peer, kEngineTagBase + tag, &len, sizeof len));
  if (len > kMaxBlobBytes)
    return TSR_FAIL(tsrInternalError, "rank %d: peer %d announced a %llu-byte memory blob", rank_,
                    peer, static_cast<unsigned long long>(len));
  blob->assign(len, '\0');
  if (len > 0) TSR_CHECK(b.recv(peer, kEngineTagBase + tag, blob->data(), blob->size()));
  return tsrSuccess;
}

Result EngineImpl::bindPlan(BoundPlan* bp) {
  const Plan& plan = *bp->plan;
  if (plan.ranks[static_cast<size_t>(rank_)].scratchSegments > 0) {
    TSR_CHECK(ctx_->allocate(scratchBytes_, MemoryKind::kHost, &bp->scratch));
    bp->scratchBase = static_cast<char*>(bp->scratch->data());
  }
  PlanHello mine{bp->fingerprint, scratchBytes_};
  Bootstrap& b = ctx_->bootstrap();
  size_t sem = 0;
  for (size_t s = 0; s < bp->peers.size(); ++s) {
    PeerLink& link = bp->peers[s];
    TSR_CHECK(connection(link.peer, &link.connection));
    link.mapped = link.connection->mapsMemory();
    TSR_CHECK(b.send(link.peer, kEngineTagBase + kTagPlanSetup, &mine, sizeof mine));
    TSR_CHECK(sendBlob(link.peer, kTagPlanSetup, bp->scratch.get()));
    PlanHello theirs{};
    TSR_CHECK(b.recv(link.peer, kEngineTagBase + kTagPlanSetup, &theirs, sizeof theirs));
    std::string blob;
    TSR_CHECK(recvBlob(link.peer, kTagPlanSetup, &blob));
    if (theirs.fingerprint != mine.fingerprint || theirs.scratchBytes != mine.scratchBytes)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d and rank %d set up different plans for the same call (%s here; "
                      "scratch %llu bytes here, %llu there): are TESSERA_ALGO, "
                      "TESSERA_SCRATCH_BYTES and the calls the same on every rank?",
                      rank_, link.peer, plan.name.c_str(),
                      static_cast<unsigned long long>(mine.scratchBytes),
                      static_cast<unsigned long long>(theirs.scratchBytes));
    if (!blob.empty()) {
      TSR_CHECK(link.connection->importMemory(blob, &link.scratch));
      link.scratchMapped = static_cast<char*>(link.scratch->mapped());
    }
    for (; sem < bp->sems.size() && bp->sems[sem].peerSlot == static_cast<int>(s); ++sem) {
      SemLink& sl = bp->sems[sem];
      TSR_CHECK(ctx_->createSemaphore(link.connection, &sl.semaphore, kEngineTransportTag));
      sl.handle = sl.semaphore->deviceHandle();
    }
    bp->anyUnmapped = bp->anyUnmapped || !link.mapped;
  }
  if (bp->anyUnmapped) TSR_CHECK(ensureBounce());
  bp->bound = true;
  TSR_INFO("rank %d: plan %s bound (%zu peers, %zu semaphores, scratch %s)", rank_,
           plan.name.c_str(), bp->peers.size(), bp->sems.size(), bp->scratch ? "yes" : "no");
  return tsrSuccess;
}

Result EngineImpl::ensureBounce() {
  if (bounce_.memory) return tsrSuccess;
  TSR_CHECK(
      ctx_->allocate(kBounceLoadBytes + kBounceRingBytes, MemoryKind::kHost, &bounce_.memory));
  bounce_.base = static_cast<char*>(bounce_.memory->data());
  bounce_.loadBytes = kBounceLoadBytes;
  bounce_.ringBytes = kBounceRingBytes;
  bounce_.ringAt = 0;
  return tsrSuccess;
}

Result EngineImpl::flushDirty() {
  for (Connection* c : bounce_.dirty) TSR_CHECK(c->flush());
  bounce_.dirty.clear();
  return tsrSuccess;
}

Result EngineImpl::stageStore(size_t bytes, size_t* offset) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded > bounce_.ringBytes)
    return TSR_FAIL(tsrInternalError, "rank %d: %zu bytes do not fit the %zu-byte staging ring",
                    rank_, bytes, bounce_.ringBytes);
  if (bounce_.ringAt + rounded > bounce_.ringBytes) {
    // Puts from the ring may still read it until their connection is flushed.
    TSR_CHECK(flushDirty());
    bounce_.ringAt = 0;
  }
  *offset = bounce_.loadBytes + bounce_.ringAt;
  bounce_.ringAt += rounded;
  return tsrSuccess;
}

Result EngineImpl::ensureControl() {
  if (controlReady_) return tsrSuccess;
  size_t bytes =
      (proto::kExchangeParities * static_cast<size_t>(nranks_) + 1) * kHandshakeSlotBytes;
  TSR_CHECK(ctx_->allocate(bytes, MemoryKind::kHost, &control_.memory));
  control_.base = static_cast<char*>(control_.memory->data());
  std::memset(control_.base, 0, bytes);
  control_.links.resize(static_cast<size_t>(nranks_));
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    ControlLink& link = control_.links[static_cast<size_t>(p)];
    TSR_CHECK(connection(p, &link.connection));
    TSR_CHECK(ctx_->exchangeMemory(*link.connection, *control_.memory, &link.remote,
                                   kEngineTransportTag));
    TSR_CHECK(ctx_->createSemaphore(link.connection, &link.semaphore, kEngineTransportTag));
    control_.mapsAll = control_.mapsAll && link.connection->mapsMemory();
    std::string why;
    bool cross = link.connection->crossMemory(&why);
    control_.sameSpaceAll = control_.sameSpaceAll && cross && link.connection->sharesAddressSpace();
    if (!cross) {
      if (control_.crossAll)
        TSR_INFO(
            "rank %d: no cross-memory attach to rank %d (%s): calls on unregistered "
            "buffers stage through the scratch",
            rank_, p, why.c_str());
      control_.crossAll = false;
    }
  }
  controlReady_ = true;
  return tsrSuccess;
}

Result EngineImpl::p2pLink(int peer, P2PLink** out) {
  auto& slot = p2p_[static_cast<size_t>(peer)];
  if (!slot) {
    auto link = std::make_unique<P2PLink>();
    TSR_CHECK(connection(peer, &link->connection));
    link->mapped = link->connection->mapsMemory();
    TSR_CHECK(ctx_->allocate(kP2PSlots * (kP2PSlotBytes + kP2PHeaderBytes), MemoryKind::kHost,
                             &link->inbox));
    TSR_CHECK(ctx_->exchangeMemory(*link->connection, *link->inbox, &link->peerInbox,
                                   kEngineTransportTag));
    TSR_CHECK(ctx_->createSemaphore(link->connection, &link->data, kEngineTransportTag));
    TSR_CHECK(ctx_->createSemaphore(link->connection, &link->ack, kEngineTransportTag));
    if (!link->mapped) TSR_CHECK(ensureBounce());
    slot = std::move(link);
  }
  *out = slot.get();
  return tsrSuccess;
}

}  // namespace tessera
