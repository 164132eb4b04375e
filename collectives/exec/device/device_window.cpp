// Windows of the device executor (device_executor.hpp, DeviceWindow): collective registration of
// a buffer on every rank, mapped by every peer over the device executor's own connections (p2p
// and cuda_ipc on a GPU; inproc and shm in the emulation), so that calls on it run zero-copy plans
// with no handshake: the kernels find a peer's buffer in the window's table (WorkItem::peerInput).
//
// Registration, on every rank in the same order: register the buffer with the transports (one
// allGather: if any rank could not, every rank refuses the window alike), then, peer by peer in
// increasing order (as plans bind: bootstrap sends never wait for the receiver),
// connect, send this rank's export for that connection's transport (an empty blob where it cannot
// export the memory, e.g. malloc memory to another process) and receive the peer's; map what came.
// One allGather then says every rank's size and whether it mapped all its peers, so every rank
// computes the same DeviceWindow::usable and minBytes.
//
// Boards (WorkItem::board): where every rank is in this process, buffers registered locally
// (tsrCommRegister, every rank's in the same call, as NCCL asks of registered buffers) need no
// mapping, only this call's pointers: each rank's board (one PeerPointers per rank) is mapped by
// its peers once, at the first such call, and the kernels publish and read the pointers there.
// Between processes (shareLocal) the pointers published are the buffers as each peer mapped them:
// at every call on local registrations the ranks exchange, pairwise, what the peers have not
// mapped yet (each registration's export, once) and what was dropped (DESIGN.md, "Windows").
//
// Deregistration: one allGather of every rank's verdict (an eager call on the window still in
// flight refuses it), so that every rank refuses or none does; then each rank clears the window's
// table (a graph replayed later finds no peer there and fails instead of touching freed memory),
// drops its mappings of the peers' windows, and only after a barrier (every peer has unmapped this
// rank's window) releases its own registration.
#include <algorithm>
#include <cstring>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "core/datatype.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr uint64_t kMaxWindowBlobBytes = 1 << 20;

struct WindowAgreement {
  uint64_t bytes;  // 0: this rank could not register its window
  uint32_t mappedAll;
  uint32_t pad;
};

}  // namespace

Result DeviceExecutor::registerWindow(void* ptr, size_t bytes, DeviceWindow** out) {
  const int rank = options_.rank, n = options_.nranks;
  if (ptr == nullptr || bytes == 0 || out == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: a window needs a buffer (%p, %zu bytes)", rank,
                    ptr, bytes);
  TransportContext& ctx = *options_.transports;
  Bootstrap& b = ctx.bootstrap();
  const int tag = kEngineTagBase + kTagDeviceWindow;
  auto w = std::make_unique<DeviceWindow>();
  w->base = static_cast<char*>(ptr);
  w->bytes = bytes;
  w->peers.resize(static_cast<size_t>(n));
  // First every rank's own registration, agreed: a rank whose memory the transports refuse makes
  // every rank refuse the window (nothing half-made, the communicator still usable).
  Result r = ctx.registerMemory(ptr, bytes, emulated() ? MemoryKind::kHost : MemoryKind::kCuda,
                                &w->memory);
  const std::string why = r != tsrSuccess ? lastErrorMessage() : "";
  std::vector<WindowAgreement> all(static_cast<size_t>(n));
  all[static_cast<size_t>(rank)] = WindowAgreement{r == tsrSuccess ? bytes : 0, 0, 0};
  if (Result g = b.allGather(all.data(), sizeof(WindowAgreement)); g != tsrSuccess)
    return options_.engine->poison(g);  // peers may be past it: out of step
  for (int p = 0; p < n; ++p)
    if (all[static_cast<size_t>(p)].bytes == 0)
      return TSR_FAIL(p == rank ? r : tsrInvalidUsage,
                      "rank %d: window %p (%zu bytes) not registered: rank %d could not register "
                      "its buffer%s%s",
                      rank, ptr, bytes, p, p == rank ? ": " : "", why.c_str());
  // A failure from here on leaves the peers out of step (they wait for this rank's blob or its
  // allGather): the engine is poisoned, as when a plan's binding fails.
  auto fail = [&](Result e) { return options_.engine->poison(e); };
  bool mappedAll = true;
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    std::shared_ptr<Connection> conn;
    if ((r = connection(p, &conn)) != tsrSuccess) return fail(r);
    std::string mine;
    MemoryExport* e = w->memory->exportOf(conn->kind());
    if (conn->mapsMemory() && e != nullptr && !e->section.empty() &&
        (r = w->memory->serialize(&mine)) != tsrSuccess)
      return fail(r);
    uint64_t len = mine.size();
    if ((r = b.send(p, tag, &len, sizeof len)) != tsrSuccess ||
        (len > 0 && (r = b.send(p, tag, mine.data(), len)) != tsrSuccess))
      return fail(r);
    uint64_t theirLen = 0;
    if ((r = b.recv(p, tag, &theirLen, sizeof theirLen)) != tsrSuccess) return fail(r);
    if (theirLen > kMaxWindowBlobBytes)
      return fail(TSR_FAIL(tsrInternalError, "rank %d: rank %d announced a %llu-byte window blob",
                           rank, p, static_cast<unsigned long long>(theirLen)));
    std::string theirs(theirLen, '\0');
    if (theirLen > 0 && (r = b.recv(p, tag, theirs.data(), theirLen)) != tsrSuccess) return fail(r);
    if (theirs.empty()) {
      mappedAll = false;  // the peer cannot export its window to this rank: staged calls
      continue;
    }
    if ((r = conn->importMemory(theirs, &w->peers[static_cast<size_t>(p)])) != tsrSuccess)
      return fail(r);
    if (w->peers[static_cast<size_t>(p)]->mapped() == nullptr) mappedAll = false;
  }
  all[static_cast<size_t>(rank)] = WindowAgreement{bytes, mappedAll ? 1u : 0u, 0};
  if ((r = b.allGather(all.data(), sizeof(WindowAgreement))) != tsrSuccess) return fail(r);
  w->usable = true;
  w->minBytes = bytes;
  for (const WindowAgreement& a : all) {
    w->usable = w->usable && a.mappedAll != 0;
    w->minBytes = std::min<size_t>(w->minBytes, a.bytes);
  }
  // The table the kernels read: every rank's window as mapped here (this rank's own at `rank`).
  std::vector<char*> table(static_cast<size_t>(n), nullptr);
  table[static_cast<size_t>(rank)] = w->base;
  for (int p = 0; p < n; ++p)
    if (w->peers[static_cast<size_t>(p)])
      table[static_cast<size_t>(p)] =
          static_cast<char*>(w->peers[static_cast<size_t>(p)]->mapped());
  // Local: a failure here leaves every peer with a window this rank has not (its calls on it
  // would not match): poisoned.
  if ((r = allocate(table.size() * sizeof(char*), &w->table)) != tsrSuccess ||
      (r = upload(w->table->data(), table.data(), table.size() * sizeof(char*))) != tsrSuccess)
    return fail(r);
  TSR_INFO("rank %d: window %p (%zu bytes) registered: %s, smallest window %zu bytes", rank, ptr,
           bytes,
           w->usable ? "every peer maps it (zero-copy)" : "not mapped by every peer (staged)",
           w->minBytes);
  *out = w.get();
  windows_.push_back(std::move(w));
  return tsrSuccess;
}

Result DeviceExecutor::deregisterWindow(DeviceWindow* window) {
  const int rank = options_.rank, n = options_.nranks;
  auto it = std::find_if(windows_.begin(), windows_.end(),
                         [&](const std::unique_ptr<DeviceWindow>& w) { return w.get() == window; });
  if (it == windows_.end())
    return TSR_FAIL(tsrInvalidArgument, "rank %d: %p is not a window of this communicator", rank,
                    static_cast<void*>(window));
  DeviceWindow& w = **it;
  // This rank's verdict: 0 to go on, else the ticket of its call still in flight.
  uint32_t busy = 0;
  if (w.eagerUsed && !eagerDone(w.lastTicket)) busy = w.lastTicket;
  std::vector<uint32_t> verdicts(static_cast<size_t>(n), 0);
  verdicts[static_cast<size_t>(rank)] = busy;
  TransportContext& ctx = *options_.transports;
  Result r = ctx.bootstrap().allGather(verdicts.data(), sizeof(uint32_t));
  if (r != tsrSuccess) return options_.engine->poison(r);
  for (int p = 0; p < n; ++p)
    if (verdicts[static_cast<size_t>(p)] != 0)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: window %p (%zu bytes) was not deregistered: rank %d still has a "
                      "call on it in flight; synchronize the streams that use it (tsrCommFinalize "
                      "or cudaStreamSynchronize) on every rank, then deregister",
                      rank, static_cast<void*>(w.base), w.bytes, p);
  // No replay may reach a peer's window once it can be freed (a captured call's table stays, with
  // no entries, as long as the executor does).
  std::vector<char*> none(static_cast<size_t>(n), nullptr);
  r = upload(w.table->data(), none.data(), none.size() * sizeof(char*));
  if (r != tsrSuccess) return options_.engine->poison(r);  // peers wait at the barrier below
  if (w.captured) retiredTables_.push_back(w.table);
  for (auto& p : w.peers) p.reset();
  r = ctx.bootstrap().barrier();  // every peer has dropped its mapping of this rank's window
  if (r != tsrSuccess) return options_.engine->poison(r);
  windows_.erase(it);  // releases this rank's registration
  return tsrSuccess;
}

bool DeviceExecutor::windowsOf(const CollCall& call, WindowUse* out) const {
  *out = WindowUse{};
  if (windows_.empty()) return false;
  const int n = options_.nranks;
  const size_t elem = call.count * dtypeSize(call.dtype);
  const size_t inBytes = elem * static_cast<size_t>(inputSegments(call.collective, n));
  const size_t outBytes = elem * static_cast<size_t>(outputSegments(call.collective, n));
  auto find = [&](const void* ptr, size_t bytes, const DeviceWindow** w, uint64_t* offset) {
    const char* p = static_cast<const char*>(ptr);
    for (const auto& x : windows_) {
      if (!x->usable || p < x->base) continue;
      const auto off = static_cast<size_t>(p - x->base);
      if (off > x->minBytes || bytes > x->minBytes - off) continue;
      *w = x.get();
      *offset = off;
      return true;
    }
    return false;
  };
  // Both buffers, also the one a rank does not use in a broadcast or reduce: a non-root finds the
  // root's input (or output) through its own buffer's window and offset, so every rank names
  // both, at the same offsets (in place, or both in windows), and every rank decides alike.
  return find(call.sendbuf, inBytes, &out->input, &out->inputOffset) &&
         find(call.recvbuf, outBytes, &out->output, &out->outputOffset);
}

bool DeviceExecutor::everyPeerOver(std::initializer_list<TransportKind> accepted) {
  for (int p = 0; p < options_.nranks; ++p) {
    if (p == options_.rank) continue;
    TransportKind kind;
    std::string why;
    if (options_.transports->selectTransport(p, &kind, &why) != tsrSuccess) return false;
    if (emulated()) kind = hostTransportKind(kind);
    if (std::find(accepted.begin(), accepted.end(), kind) == accepted.end()) return false;
  }
  return true;
}

bool DeviceExecutor::peersInProcess() {
  if (peersInProcess_ < 0)
    peersInProcess_ = everyPeerOver({emulated() ? TransportKind::kInproc : TransportKind::kP2p});
  return peersInProcess_ == 1;
}

Result DeviceExecutor::ensureBoards() {
  const int rank = options_.rank, n = options_.nranks;
  const size_t un = static_cast<size_t>(n);
  if (!board_) TSR_CHECK(allocate(un * sizeof(exec::PeerPointers), &board_));
  Bootstrap& b = options_.transports->bootstrap();
  const int tag = kEngineTagBase + kTagDeviceWindow;
  std::string mine;
  TSR_CHECK(board_->serialize(&mine));
  peerBoardMaps_.assign(un, nullptr);
  std::vector<exec::PeerPointers*> table(un, nullptr);
  for (int p = 0; p < n; ++p) {  // increasing peer order, as windows (see the file comment)
    if (p == rank) continue;
    std::shared_ptr<Connection> conn;
    TSR_CHECK(connection(p, &conn));
    uint64_t len = mine.size();
    TSR_CHECK(b.send(p, tag, &len, sizeof len));
    TSR_CHECK(b.send(p, tag, mine.data(), len));
    uint64_t theirLen = 0;
    TSR_CHECK(b.recv(p, tag, &theirLen, sizeof theirLen));
    if (theirLen == 0 || theirLen > kMaxWindowBlobBytes)
      return TSR_FAIL(tsrInternalError, "rank %d: rank %d announced a %llu-byte board blob", rank,
                      p, static_cast<unsigned long long>(theirLen));
    std::string theirs(theirLen, '\0');
    TSR_CHECK(b.recv(p, tag, theirs.data(), theirLen));
    TSR_CHECK(conn->importMemory(theirs, &peerBoardMaps_[static_cast<size_t>(p)]));
    table[static_cast<size_t>(p)] =
        static_cast<exec::PeerPointers*>(peerBoardMaps_[static_cast<size_t>(p)]->mapped());
    if (table[static_cast<size_t>(p)] == nullptr)
      return TSR_FAIL(tsrInternalError, "rank %d: rank %d's board is not mapped here", rank, p);
  }
  TSR_CHECK(allocate(un * sizeof(exec::PeerPointers*), &peerBoards_));
  TSR_CHECK(upload(peerBoards_->data(), table.data(), un * sizeof(exec::PeerPointers*)));
  TSR_INFO(
      "rank %d: boards set up: zero-copy on locally registered buffers of this process's "
      "ranks",
      rank);
  return tsrSuccess;
}

Result DeviceExecutor::peersMapEachOther(bool* out) {
  if (peersMap_ < 0) {
    const int rank = options_.rank, n = options_.nranks;
    const bool mine = everyPeerOver({TransportKind::kP2p, TransportKind::kCudaIpc,
                                     TransportKind::kInproc, TransportKind::kShm});
    // Agreed: a pair that cannot map each other (ucx between hosts, a link forced) makes every
    // rank stage, not only the two.
    std::vector<uint8_t> all(static_cast<size_t>(n), 0);
    all[static_cast<size_t>(rank)] = mine ? 1 : 0;
    TSR_CHECK(options_.transports->bootstrap().allGather(all.data(), 1));
    peersMap_ = std::all_of(all.begin(), all.end(), [](uint8_t v) { return v != 0; }) ? 1 : 0;
  }
  *out = peersMap_ == 1;
  return tsrSuccess;
}

namespace {
// What each rank sends every peer at a call on local registrations between processes (shareLocal):
// this header, `dropped` keys, then `fresh` registrations (LocalBlobHeader and the export each).
struct LocalShareHeader {
  uint64_t callNo;
  uint32_t exportable;  // every buffer this rank uses can be mapped by every peer
  uint32_t capturing;
  uint32_t dropped;
  uint32_t fresh;
};
struct LocalBlobHeader {
  uint64_t key;
  uint64_t bytes;
};
constexpr uint32_t kMaxLocalKeys = 1 << 16;
}  // namespace

Result DeviceExecutor::shareLocal(uint64_t callNo, void* stream, const LocalBuffer bufs[2],
                                  WindowUse* use, bool* zeroCopy) {
  const int rank = options_.rank, n = options_.nranks;
  *zeroCopy = false;
  Bootstrap& b = options_.transports->bootstrap();
  const int tag = kEngineTagBase + kTagDeviceWindow;
  // This rank's side: each buffer's share, registered with the transports at its first call.
  LocalShare* shares[2] = {nullptr, nullptr};
  bool exportable = true;
  for (int k = 0; k < 2; ++k) {
    if (bufs[k].key == 0) continue;
    auto& slot = locals_[bufs[k].key];
    if (!slot) {
      slot = std::make_unique<LocalShare>();
      slot->key = bufs[k].key;
      slot->base = bufs[k].base;
      slot->bytes = bufs[k].bytes;
      // Memory the transports cannot register or export to some peer (malloc memory to another
      // process, a pool's memory) is not exportable: every rank then stages, alike.
      Result r = options_.transports->registerMemory(
          slot->base, slot->bytes, emulated() ? MemoryKind::kHost : MemoryKind::kCuda,
          &slot->memory);
      slot->exportable = r == tsrSuccess;
      if (r != tsrSuccess) clearLastError();
      for (int p = 0; p < n && slot->exportable; ++p) {
        if (p == rank) continue;
        std::shared_ptr<Connection> conn;
        TSR_CHECK(connection(p, &conn));
        MemoryExport* e = slot->memory->exportOf(conn->kind());
        slot->exportable = conn->mapsMemory() && e != nullptr && !e->section.empty();
      }
    }
    shares[k] = slot.get();
    exportable = exportable && slot->exportable;
  }
  const bool capturing = this->capturing(stream);
  // The exports no peer has mapped yet (the same for every peer: a share is all or nothing).
  std::vector<LocalShare*> fresh;
  if (exportable)
    for (LocalShare* l : shares)
      if (l != nullptr && !l->shared && std::find(fresh.begin(), fresh.end(), l) == fresh.end())
        fresh.push_back(l);
  std::string mine;
  {
    LocalShareHeader h{callNo, exportable ? 1u : 0u, capturing ? 1u : 0u,
                       static_cast<uint32_t>(droppedLocals_.size()),
                       static_cast<uint32_t>(fresh.size())};
    mine.append(reinterpret_cast<const char*>(&h), sizeof h);
    mine.append(reinterpret_cast<const char*>(droppedLocals_.data()),
                droppedLocals_.size() * sizeof(uint64_t));
    for (LocalShare* l : fresh) {
      std::string blob;
      TSR_CHECK(l->memory->serialize(&blob));
      LocalBlobHeader bh{l->key, blob.size()};
      mine.append(reinterpret_cast<const char*>(&bh), sizeof bh);
      mine += blob;
    }
  }
  // From here on a failure leaves the peers out of step (they wait for this rank's messages).
  auto fail = [&](Result e) { return options_.engine->poison(e); };
  Result r = tsrSuccess;
  std::vector<std::string> theirs(static_cast<size_t>(n));
  bool everyExportable = exportable, anyFresh = !fresh.empty(), anyCapturing = capturing;
  for (int p = 0; p < n; ++p) {  // increasing peer order, as windows (see the file comment)
    if (p == rank) continue;
    uint64_t len = mine.size();
    if ((r = b.send(p, tag, &len, sizeof len)) != tsrSuccess ||
        (r = b.send(p, tag, mine.data(), len)) != tsrSuccess)
      return fail(r);
    uint64_t theirLen = 0;
    if ((r = b.recv(p, tag, &theirLen, sizeof theirLen)) != tsrSuccess) return fail(r);
    if (theirLen < sizeof(LocalShareHeader) || theirLen > 64 * kMaxWindowBlobBytes)
      return fail(TSR_FAIL(tsrInternalError,
                           "rank %d: rank %d announced a %llu-byte message for the buffers of call "
                           "%llu",
                           rank, p, static_cast<unsigned long long>(theirLen),
                           static_cast<unsigned long long>(callNo)));
    std::string& t = theirs[static_cast<size_t>(p)];
    t.assign(theirLen, '\0');
    if ((r = b.recv(p, tag, t.data(), theirLen)) != tsrSuccess) return fail(r);
    LocalShareHeader h;
    std::memcpy(&h, t.data(), sizeof h);
    if (h.callNo != callNo)
      return fail(TSR_FAIL(tsrInvalidUsage,
                           "rank %d: call %llu is on locally registered buffers here and rank %d "
                           "is at its call %llu: every rank must pass registered buffers to the "
                           "same call (as NCCL asks of registered buffers)",
                           rank, static_cast<unsigned long long>(callNo), p,
                           static_cast<unsigned long long>(h.callNo)));
    if (h.dropped > kMaxLocalKeys || h.fresh > 2)
      return fail(TSR_FAIL(tsrInternalError,
                           "rank %d: rank %d's message names %u dropped and %u "
                           "new registrations",
                           rank, p, h.dropped, h.fresh));
    everyExportable = everyExportable && h.exportable != 0;
    anyFresh = anyFresh || h.fresh != 0;
    anyCapturing = anyCapturing || h.capturing != 0;
  }
  droppedLocals_.clear();
  // What every rank now knows alike: whether to map, and whether a capture forbids it.
  const bool go = everyExportable && !(anyFresh && anyCapturing);
  std::vector<std::vector<uint64_t>> replies(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    const std::string& t = theirs[static_cast<size_t>(p)];
    LocalShareHeader h;
    std::memcpy(&h, t.data(), sizeof h);
    size_t at = sizeof h;
    if (at + h.dropped * sizeof(uint64_t) > t.size())
      return fail(TSR_FAIL(tsrInternalError, "rank %d: rank %d's message is cut short", rank, p));
    for (uint32_t i = 0; i < h.dropped; ++i, at += sizeof(uint64_t)) {
      uint64_t key;
      std::memcpy(&key, t.data() + at, sizeof key);
      imports_.erase({p, key});
    }
    if (!go) continue;
    for (uint32_t i = 0; i < h.fresh; ++i) {
      LocalBlobHeader bh;
      if (at + sizeof bh > t.size()) break;
      std::memcpy(&bh, t.data() + at, sizeof bh);
      at += sizeof bh;
      if (bh.bytes > t.size() - at)
        return fail(TSR_FAIL(tsrInternalError, "rank %d: rank %d's export is cut short", rank, p));
      std::shared_ptr<Connection> conn;
      if ((r = connection(p, &conn)) != tsrSuccess) return fail(r);
      std::shared_ptr<RemoteMemory> m;
      if ((r = conn->importMemory(t.substr(at, bh.bytes), &m)) != tsrSuccess) return fail(r);
      at += bh.bytes;
      if (m->mapped() == nullptr)
        return fail(TSR_FAIL(tsrInternalError,
                             "rank %d: rank %d's registered buffer is not mapped here", rank, p));
      replies[static_cast<size_t>(p)].push_back(
          static_cast<uint64_t>(reinterpret_cast<uintptr_t>(m->mapped())));
      imports_[{p, bh.key}] = std::move(m);
    }
    if (replies[static_cast<size_t>(p)].size() != h.fresh)
      return fail(TSR_FAIL(tsrInternalError, "rank %d: rank %d's message is cut short", rank, p));
  }
  if (anyFresh && anyCapturing && everyExportable)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: call %llu is being captured into a graph and is the first call on a "
                    "buffer registered locally (on this rank or a peer) between processes; mapping "
                    "it on the peers allocates memory, which a capture forbids: make one such call "
                    "outside the capture first",
                    rank, static_cast<unsigned long long>(callNo));
  if (!go) return tsrSuccess;  // staged, on every rank
  // Where each peer mapped this rank's new registrations: answers, in the same order.
  std::vector<std::vector<char*>> remote(fresh.size(), std::vector<char*>(static_cast<size_t>(n)));
  for (size_t i = 0; i < fresh.size(); ++i) remote[i][static_cast<size_t>(rank)] = fresh[i]->base;
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    const auto& rep = replies[static_cast<size_t>(p)];
    if (!rep.empty() &&
        (r = b.send(p, tag, rep.data(), rep.size() * sizeof(uint64_t))) != tsrSuccess)
      return fail(r);
    if (fresh.empty()) continue;
    std::vector<uint64_t> got(fresh.size());
    if ((r = b.recv(p, tag, got.data(), got.size() * sizeof(uint64_t))) != tsrSuccess)
      return fail(r);
    for (size_t i = 0; i < fresh.size(); ++i)
      remote[i][static_cast<size_t>(p)] = reinterpret_cast<char*>(static_cast<uintptr_t>(got[i]));
  }
  for (size_t i = 0; i < fresh.size(); ++i) {
    LocalShare& l = *fresh[i];
    if ((r = allocate(static_cast<size_t>(n) * sizeof(char*), &l.remote)) != tsrSuccess ||
        (r = upload(l.remote->data(), remote[i].data(), remote[i].size() * sizeof(char*))) !=
            tsrSuccess)
      return fail(r);
    l.shared = true;
  }
  *use = WindowUse{};
  use->board = true;
  use->mapped = true;
  use->localInput = shares[0];
  use->inputOffset = bufs[0].offset;
  use->localOutput = shares[1];
  use->outputOffset = bufs[1].offset;
  *zeroCopy = true;
  return tsrSuccess;
}

void DeviceExecutor::dropLocal(uint64_t key) {
  auto it = locals_.find(key);
  if (it == locals_.end()) return;
  if (it->second->shared) droppedLocals_.push_back(key);
  if (it->second->captured && it->second->remote) retiredTables_.push_back(it->second->remote);
  locals_.erase(it);
}

void DeviceExecutor::noteWindowUse(const WindowUse& use, bool captured, uint32_t ticket) {
  if (captured)
    for (LocalShare* l : {use.localInput, use.localOutput})
      if (l != nullptr) l->captured = true;
  for (const DeviceWindow* c : {use.input, use.output}) {
    if (c == nullptr) continue;
    auto* w = const_cast<DeviceWindow*>(c);  // the executor's own (windows_)
    if (captured) {
      w->captured = true;
    } else {
      w->eagerUsed = true;
      w->lastTicket = ticket;
    }
  }
}

}  // namespace tessera
