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
// the signal, so the reader's receive never waits on the writer's progress.
#include <cstring>

#include "collectives/exec/engine_impl.hpp"
#include "core/datatype.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr uint64_t kRecordMagic = 0x5453524853484b31ull;  // "TSRHSHK1"

bool contains(const std::vector<uint32_t>& v, uint32_t x) {
  for (uint32_t y : v)
    if (y == x) return true;
  return false;
}
}  // namespace

const Registration* EngineImpl::findRegistration(const void* ptr, size_t bytes) const {
  const char* p = static_cast<const char*>(ptr);
  for (const auto& r : registrations_)
    if (p >= r->base && bytes <= r->bytes && static_cast<size_t>(p - r->base) <= r->bytes - bytes)
      return r.get();
  return nullptr;
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
  const Registration* in = findRegistration(call.sendbuf, inBytes);
  const Registration* outReg = findRegistration(call.recvbuf, outBytes);
  const Registration* used[2] = {nullptr, nullptr};
  if (call.sendbuf != nullptr && usable(in)) {
    r.inId = in->memory->id();
    r.inOffset = static_cast<uint64_t>(static_cast<const char*>(call.sendbuf) - in->base);
    r.flags |= kHandshakeInOk;
    used[0] = in;
  }
  if (call.recvbuf != nullptr && usable(outReg)) {
    r.outId = outReg->memory->id();
    r.outOffset = static_cast<uint64_t>(static_cast<const char*>(call.recvbuf) - outReg->base);
    r.flags |= kHandshakeOutOk;
    used[1] = outReg;
  }
  // The blobs go first, in the order (input, output) in which readers look at the ids.
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    ControlLink& link = control_.links[static_cast<size_t>(p)];
    for (const Registration* reg : used) {
      if (reg == nullptr || contains(link.sentIds, reg->memory->id())) continue;
      TSR_CHECK(sendBlob(p, kTagUserBlob, reg->memory.get()));
      link.sentIds.push_back(reg->memory->id());
    }
  }
  return tsrSuccess;
}

Result EngineImpl::publishRecord(const HandshakeRecord& mine) {
  size_t parity = control_.rounds % 2;
  size_t slot =
      (parity * static_cast<size_t>(nranks_) + static_cast<size_t>(rank_)) * kHandshakeSlotBytes;
  size_t outbox = 2 * static_cast<size_t>(nranks_) * kHandshakeSlotBytes;
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
  size_t parity = control_.rounds % 2;
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
    for (uint32_t id : {r.inId, r.outId}) {
      if (id == 0 || link.imports.count(id) != 0) continue;
      std::string blob;
      TSR_CHECK(recvBlob(p, kTagUserBlob, &blob));
      std::shared_ptr<RemoteMemory> mem;
      if (link.connection->mapsMemory()) TSR_CHECK(link.connection->importMemory(blob, &mem));
      link.imports[id] = std::move(mem);
    }
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
  auto& imports = control_.links[static_cast<size_t>(peer)].imports;
  auto it = imports.find(id);
  if (it == imports.end() || !it->second || it->second->mapped() == nullptr)
    return TSR_FAIL(tsrInternalError, "rank %d: registered memory %u of rank %d is not mapped here",
                    rank_, id, peer);
  *out = it->second;
  return tsrSuccess;
}

}  // namespace tessera
