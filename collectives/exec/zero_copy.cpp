// Zero-copy registrations and the handshake before large calls (engine_impl.hpp).
//
// Before a call of at least TESSERA_ZERO_COPY_MIN_BYTES, every rank writes a record into a slot
// of every peer's control region (call number, collective, count, dtype, op, root, and where its
// input and output are registered) and signals the peer's control semaphore; then it reads
// everyone's. All ranks then decide alike: zero-copy iff every rank's buffers are registered
// (and exportable over the transports its peers use) and every rank maps all its peers. The same
// records expose calls that do not match across ranks (tsrInvalidUsage naming both). Smaller
// calls skip the handshake for latency; a mismatch there shows only as a timeout.
//
// Slots alternate between two parities: a rank writes round h + 2 into the slot of round h only
// after it read every peer's round h + 1, which each peer published after reading round h.
// A registration's blob travels over the bootstrap the first time a record names it, sent before
// the signal, so the reader's receive never waits on the writer's progress. The reader keeps the
// blob and maps it only once the handshake chose a zero-copy plan that reaches that buffer: the
// owner then waits for this rank's signals before it can finish the call, whereas a buffer no
// chosen plan reaches may be deregistered and freed by its owner at any moment. Records also
// carry the ids of deregistered buffers, so that readers drop their blobs and mappings.
#include <algorithm>
#include <cstring>

#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/protocols.hpp"
#include "core/datatype.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr uint64_t kRecordMagic = 0x5453524853484b32ull;  // "TSRHSHK2"

// Which buffers a rank uses in a call (NCCL lets the other be null or arbitrary).
bool usesInput(Collective c, int rank, int root) {
  return c != Collective::kBroadcast || rank == root;
}
bool usesOutput(Collective c, int rank, int root) {
  return c != Collective::kReduce || rank == root;
}

bool isRetired(const HandshakeRecord& r, uint32_t id) {
  for (uint32_t i = 0; i < r.retiredCount; ++i)
    if (r.retired[i] == id) return true;
  return false;
}

template <typename T, typename IdOf>
T* findId(std::vector<T>& v, uint32_t id, IdOf idOf) {
  for (T& x : v)
    if (idOf(x) == id) return &x;
  return nullptr;
}

// Moves the entry with `id` to the back (most recently named); false when there is none.
template <typename T, typename IdOf>
bool touch(std::vector<T>& v, uint32_t id, IdOf idOf) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (idOf(v[i]) != id) continue;
    T x = std::move(v[i]);
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
    v.push_back(std::move(x));
    return true;
  }
  return false;
}

template <typename T>
void evictOldest(std::vector<T>& v) {
  if (v.size() > kMaxPeerBlobs)
    v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() - kMaxPeerBlobs));
}

uint32_t sentId(uint32_t id) { return id; }
uint32_t blobId(const PeerBlob& b) { return b.id; }

}  // namespace

const Registration* EngineImpl::findRegistration(const void* ptr, size_t bytes) const {
  const char* p = static_cast<const char*>(ptr);
  for (const auto& r : registrations_)
    if (p >= r->base && bytes <= r->bytes && static_cast<size_t>(p - r->base) <= r->bytes - bytes)
      return r.get();
  return nullptr;
}

Result EngineImpl::registerBuffer(void* ptr, size_t bytes, void** handle) {
  if (ptr == nullptr || bytes == 0 || handle == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: registerBuffer(%p, %zu bytes) needs a buffer",
                    rank_, ptr, bytes);
  auto reg = std::make_unique<Registration>();
  TSR_CHECK(ctx_->registerMemory(ptr, bytes, MemoryKind::kHost, &reg->memory));
  reg->base = static_cast<char*>(ptr);
  reg->bytes = bytes;
  *handle = reg.get();
  registrations_.push_back(std::move(reg));
  return tsrSuccess;
}

Result EngineImpl::deregisterBuffer(void* handle) {
  for (auto it = registrations_.begin(); it != registrations_.end(); ++it) {
    if (it->get() == handle) {
      retireRegistration((*it)->memory->id());
      registrations_.erase(it);
      return tsrSuccess;
    }
  }
  return TSR_FAIL(tsrInvalidArgument, "rank %d: deregisterBuffer(%p): not a registration", rank_,
                  handle);
}

Result EngineImpl::makeRecord(const CollCall& call, uint64_t callNo, HandshakeRecord* out) {
  HandshakeRecord& r = *out;
  r = HandshakeRecord{};
  r.call = callNo;
  r.count = call.count;
  r.collective = static_cast<uint8_t>(call.collective);
  r.dtype = static_cast<uint8_t>(call.dtype);
  r.opKind = static_cast<uint8_t>(call.op.kind);
  r.root = collectiveHasRoot(call.collective) ? call.root : 0;
  r.magic = kRecordMagic;
  if (control_.mapsAll) r.flags |= kHandshakeMapsAll;
  if (control_.crossAll) r.flags |= kHandshakeCrossAll;
  if (control_.sameSpaceAll) r.flags |= kHandshakeSameSpaceAll;
  if (usesInput(call.collective, rank_, r.root))
    r.inAddr = reinterpret_cast<uintptr_t>(call.sendbuf);
  if (usesOutput(call.collective, rank_, r.root))
    r.outAddr = reinterpret_cast<uintptr_t>(call.recvbuf);
  size_t elem = call.count * dtypeSize(call.dtype);
  size_t inBytes = elem * static_cast<size_t>(inputSegments(call.collective, nranks_));
  size_t outBytes = elem * static_cast<size_t>(outputSegments(call.collective, nranks_));
  // A registration counts only when every peer's transport can export it (malloc memory cannot
  // be mapped by another process).
  auto usable = [&](const Registration* reg) {
    if (reg == nullptr) return false;
    for (int p = 0; p < nranks_; ++p) {
      if (p == rank_) continue;
      MemoryExport* e =
          reg->memory->exportOf(control_.links[static_cast<size_t>(p)].connection->kind());
      if (e == nullptr || e->section.empty()) return false;
    }
    return true;
  };
  // A buffer this rank does not use in the call (a non-root's broadcast input or reduce output)
  // is named by no id: no plan reads it, so no peer needs its blob.
  const Registration* used[2] = {nullptr, nullptr};
  if (!usesInput(call.collective, rank_, r.root)) {
    r.flags |= kHandshakeInOk;
  } else if (const Registration* in = findRegistration(call.sendbuf, inBytes);
             call.sendbuf != nullptr && usable(in)) {
    r.inId = in->memory->id();
    r.inOffset = static_cast<uint64_t>(static_cast<const char*>(call.sendbuf) - in->base);
    r.flags |= kHandshakeInOk;
    used[0] = in;
  }
  if (!usesOutput(call.collective, rank_, r.root)) {
    r.flags |= kHandshakeOutOk;
  } else if (const Registration* o = findRegistration(call.recvbuf, outBytes);
             call.recvbuf != nullptr && usable(o)) {
    r.outId = o->memory->id();
    r.outOffset = static_cast<uint64_t>(static_cast<const char*>(call.recvbuf) - o->base);
    r.flags |= kHandshakeOutOk;
    used[1] = o;
  }
  size_t retire = std::min<size_t>(control_.retired.size(), kHandshakeRetiredPerRecord);
  for (size_t i = 0; i < retire; ++i) r.retired[i] = control_.retired[i];
  r.retiredCount = static_cast<uint32_t>(retire);
  control_.retired.erase(control_.retired.begin(),
                         control_.retired.begin() + static_cast<std::ptrdiff_t>(retire));
  // The steps of ControlLink, writer side; the blobs go first, in the order (input, output) in
  // which readers look at the ids.
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    ControlLink& link = control_.links[static_cast<size_t>(p)];
    std::erase_if(link.sentIds, [&](uint32_t id) { return isRetired(r, id); });
    for (const Registration* reg : used) {
      if (reg == nullptr || touch(link.sentIds, reg->memory->id(), sentId)) continue;
      TSR_CHECK(sendBlob(p, kTagUserBlob, reg->memory.get()));
      link.sentIds.push_back(reg->memory->id());
    }
    evictOldest(link.sentIds);
  }
  return tsrSuccess;
}

void EngineImpl::retireRegistration(uint32_t id) {
  if (!controlReady_) return;
  for (ControlLink& link : control_.links) {
    if (findId(link.sentIds, id, sentId) != nullptr) {
      control_.retired.push_back(id);
      return;
    }
  }
}

Result EngineImpl::publishRecord(const HandshakeRecord& mine) {
  size_t parity = proto::exchangeParity(control_.rounds);
  size_t slot =
      (parity * static_cast<size_t>(nranks_) + static_cast<size_t>(rank_)) * kHandshakeSlotBytes;
  size_t outbox = proto::kExchangeParities * static_cast<size_t>(nranks_) * kHandshakeSlotBytes;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    ControlLink& link = control_.links[static_cast<size_t>(p)];
    if (link.remote->mapped() != nullptr) {
      std::memcpy(static_cast<char*>(link.remote->mapped()) + slot, &mine, sizeof mine);
    } else {
      std::memcpy(control_.base + outbox, &mine, sizeof mine);
      TSR_CHECK(link.connection->put(*link.remote, slot, *control_.memory, outbox, sizeof mine));
      TSR_CHECK(link.connection->flush());  // the outbox is rewritten for the next peer
    }
    TSR_CHECK(link.semaphore->signal());
    if (!link.connection->mapsMemory()) markDirty(link.connection.get());
  }
  return tsrSuccess;
}

Result EngineImpl::pollRecords(std::vector<HandshakeRecord>* records, std::vector<uint8_t>* have,
                               bool* ready) {
  size_t parity = proto::exchangeParity(control_.rounds);
  *ready = true;
  for (int p = 0; p < nranks_; ++p) {
    if ((*have)[static_cast<size_t>(p)]) continue;
    ControlLink& link = control_.links[static_cast<size_t>(p)];
    if (!link.semaphore->poll()) {
      *ready = false;
      continue;
    }
    HandshakeRecord& r = (*records)[static_cast<size_t>(p)];
    std::memcpy(&r,
                control_.base + (parity * static_cast<size_t>(nranks_) + static_cast<size_t>(p)) *
                                    kHandshakeSlotBytes,
                sizeof r);
    if (r.magic != kRecordMagic)
      return TSR_FAIL(tsrInternalError, "rank %d: the zero-copy record of rank %d is malformed",
                      rank_, p);
    if (r.retiredCount > kHandshakeRetiredPerRecord)
      return TSR_FAIL(tsrInternalError, "rank %d: the zero-copy record of rank %d retires %u ids",
                      rank_, p, r.retiredCount);
    // The steps of ControlLink, reader side. Receiving the blob keeps the bootstrap stream in
    // step with the writer; mapping it waits for a zero-copy plan (importUser).
    std::erase_if(link.blobs, [&](const PeerBlob& b) { return isRetired(r, b.id); });
    for (uint32_t id : {r.inId, r.outId}) {
      if (id == 0 || touch(link.blobs, id, blobId)) continue;
      PeerBlob b;
      b.id = id;
      TSR_CHECK(recvBlob(p, kTagUserBlob, &b.blob));
      link.blobs.push_back(std::move(b));
    }
    evictOldest(link.blobs);
    (*have)[static_cast<size_t>(p)] = 1;
  }
  if (*ready) ++control_.rounds;
  return tsrSuccess;
}

Result EngineImpl::compareRecords(const HandshakeRecord& a, int peer,
                                  const HandshakeRecord& b) const {
  auto text = [](const HandshakeRecord& r) {
    auto c = static_cast<Collective>(r.collective);
    std::string s = strprintf("call %llu %s count=%llu %s", static_cast<unsigned long long>(r.call),
                              collectiveName(c), static_cast<unsigned long long>(r.count),
                              dtypeName(static_cast<tsrDataType_t>(r.dtype)));
    if (collectiveReduces(c)) s += strprintf(" %s", redKindName(static_cast<RedKind>(r.opKind)));
    if (collectiveHasRoot(c)) s += strprintf(" root=%d", r.root);
    return s;
  };
  auto c = static_cast<Collective>(a.collective);
  bool same = a.call == b.call && a.collective == b.collective && a.count == b.count &&
              a.dtype == b.dtype && (!collectiveReduces(c) || a.opKind == b.opKind) &&
              (!collectiveHasRoot(c) || a.root == b.root);
  if (same) return tsrSuccess;
  return TSR_FAIL(tsrInvalidUsage,
                  "mismatched collective calls: rank %d called %s but rank %d called %s", rank_,
                  text(a).c_str(), peer, text(b).c_str());
}

Result EngineImpl::importUser(int peer, uint32_t id, std::shared_ptr<RemoteMemory>* out) {
  ControlLink& link = control_.links[static_cast<size_t>(peer)];
  PeerBlob* b = findId(link.blobs, id, blobId);
  if (b == nullptr)
    return TSR_FAIL(tsrInternalError,
                    "rank %d: rank %d named registered memory %u, but its blob is not here", rank_,
                    peer, id);
  if (!b->memory) {
    if (!link.connection->mapsMemory())
      return TSR_FAIL(tsrInternalError,
                      "rank %d: registered memory %u of rank %d cannot be mapped over %s", rank_,
                      id, peer, transportName(link.connection->kind()));
    TSR_CHECK(link.connection->importMemory(b->blob, &b->memory));
  }
  if (b->memory->mapped() == nullptr)
    return TSR_FAIL(tsrInternalError, "rank %d: registered memory %u of rank %d is not mapped here",
                    rank_, id, peer);
  *out = b->memory;
  return tsrSuccess;
}

size_t EngineImpl::peerBlobCount(int peer) const {
  return controlReady_ ? control_.links[static_cast<size_t>(peer)].blobs.size() : 0;
}

size_t EngineImpl::sentIdCount(int peer) const {
  return controlReady_ ? control_.links[static_cast<size_t>(peer)].sentIds.size() : 0;
}

}  // namespace tessera
