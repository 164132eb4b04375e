// inproc: ranks that are threads of one process. Mapping is the identity: an imported memory's
// address is usable as it is. Ordering is HostMappedConnection's (plain stores, then a release
// fetch_add on the peer's counter; the waiter's acquire load pairs with it).
//
// Lifetime: an import holds the owner's Memory (found in a process-wide table of exported
// memory), so a peer that signals or puts late writes into memory that still exists, as a shm
// mapping would keep its pages; the region is freed when the owner and every importer let go.
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "core/env.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

struct InprocSection {
  uint64_t processNonce;
  uint64_t address;
};

using MemoryKey = std::tuple<uint64_t, int, uint32_t>;  // context id, owner rank, memory id

struct LiveTable {
  std::mutex mutex;
  std::map<MemoryKey, std::weak_ptr<const Memory>> memories;
};
LiveTable& liveTable() {
  static auto* table = new LiveTable();  // never destroyed: exports may go at exit
  return *table;
}

struct InprocExport final : MemoryExport {
  MemoryKey key;
  ~InprocExport() override {
    LiveTable& t = liveTable();
    std::lock_guard<std::mutex> lock(t.mutex);
    t.memories.erase(key);
  }
};

struct InprocMapping final : RemoteMapping {
  std::shared_ptr<const Memory> owner;
};

class InprocConnection final : public HostMappedConnection {
 public:
  InprocConnection(std::shared_ptr<ContextState> context, int peer)
      : HostMappedConnection(std::move(context), peer, TransportKind::kInproc) {}

  // The peer is a thread of this process: its addresses are this process's (TESSERA_CMA=0 keeps
  // collectives from using them, as it keeps them from cross-memory attach between processes).
  bool crossMemory(std::string* whyNot) const override {
    bool enabled = true;
    if (envBool("TESSERA_CMA", &enabled) != tsrSuccess) enabled = true;
    if (!enabled && whyNot != nullptr) *whyNot = "TESSERA_CMA=0";
    return enabled;
  }
  bool sharesAddressSpace() const override { return true; }

 protected:
  Result doCrossRead(void* dst, uint64_t peerAddress, size_t bytes) override {
    std::memcpy(dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(peerAddress)), bytes);
    return tsrSuccess;
  }
  Result doCrossWrite(uint64_t peerAddress, const void* src, size_t bytes) override {
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(peerAddress)), src, bytes);
    return tsrSuccess;
  }
  Result doImport(const MemoryBlobHeader& header, const std::string& section, void** mapped,
                  std::unique_ptr<RemoteMapping>* mapping) override {
    InprocSection s{};
    if (section.size() != sizeof s)
      return fail(tsrInvalidArgument, "inproc memory section has %zu bytes, expected %zu",
                  section.size(), sizeof s);
    std::memcpy(&s, section.data(), sizeof s);
    uint64_t mine = context()->placements[static_cast<size_t>(context()->rank)].processNonce;
    if (s.processNonce != mine)
      return fail(tsrInvalidArgument, "inproc memory blob comes from another process");
    auto m = std::make_unique<InprocMapping>();
    {
      LiveTable& t = liveTable();
      std::lock_guard<std::mutex> lock(t.mutex);
      auto it = t.memories.find({header.contextId, header.ownerRank, header.memoryId});
      if (it != t.memories.end()) m->owner = it->second.lock();
    }
    if (!m->owner || reinterpret_cast<uintptr_t>(m->owner->data()) != s.address)
      return fail(tsrInvalidArgument, "memory %u of rank %d is no longer registered",
                  header.memoryId, header.ownerRank);
    // The blob's size bounds every put and get on the import: it must be the memory's own.
    if (header.size != m->owner->size() || header.kind != m->owner->kind())
      return fail(tsrInvalidArgument,
                  "memory %u of rank %d: the blob says %llu bytes of %s memory, the memory is "
                  "%zu bytes of %s memory",
                  header.memoryId, header.ownerRank, static_cast<unsigned long long>(header.size),
                  memoryKindName(header.kind), m->owner->size(), memoryKindName(m->owner->kind()));
    *mapped = m->owner->data();
    *mapping = std::move(m);
    return tsrSuccess;
  }
};

class InprocTransport final : public Transport {
 public:
  explicit InprocTransport(std::shared_ptr<ContextState> context) : Transport(std::move(context)) {}

  TransportKind kind() const override { return TransportKind::kInproc; }

  bool reaches(int peer, std::string* whyNot) const override {
    const auto& p = context_->placements;
    if (locality(p[static_cast<size_t>(context_->rank)], p[static_cast<size_t>(peer)]) ==
        Locality::kSameProcess)
      return true;
    *whyNot = "the peer runs in another process";
    return false;
  }

  Result exportMemory(const Memory& mem, std::unique_ptr<MemoryExport>* out) override {
    auto e = std::make_unique<InprocExport>();
    e->key = {context_->contextId, context_->rank, mem.id()};
    {
      LiveTable& t = liveTable();
      std::lock_guard<std::mutex> lock(t.mutex);
      t.memories[e->key] = mem.weak_from_this();
    }
    InprocSection s{context_->placements[static_cast<size_t>(context_->rank)].processNonce,
                    reinterpret_cast<uintptr_t>(mem.data())};
    e->section.assign(reinterpret_cast<const char*>(&s), sizeof s);
    *out = std::move(e);
    return tsrSuccess;
  }

  Result localEndpoint(int, std::string* blob) override {
    blob->clear();
    return tsrSuccess;
  }

  Result connect(int peer, const std::string&, std::shared_ptr<Connection>* out) override {
    *out = std::make_shared<InprocConnection>(context_, peer);
    return tsrSuccess;
  }
};

}  // namespace

Result makeInprocTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out) {
  *out = std::make_unique<InprocTransport>(std::move(context));
  return tsrSuccess;
}

}  // namespace tessera
