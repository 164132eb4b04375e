#include "transport/connection.hpp"

#include <atomic>
#include <cstring>

#include "transport/context_state.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

bool hostAccessible(MemoryKind kind) { return kind != MemoryKind::kCuda; }

uint64_t nextConnectionId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Connection::Connection(std::shared_ptr<ContextState> context, int peer, TransportKind kind)
    : context_(std::move(context)), peer_(peer), kind_(kind), id_(nextConnectionId()) {}

int Connection::rank() const { return context_->rank; }

Result Connection::fail(Result code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string what = vstrprintf(fmt, ap);
  va_end(ap);
  return TSR_FAIL(code, "%s connection rank %d -> peer %d: %s", transportName(kind_),
                  context_->rank, peer_, what.c_str());
}

Result Connection::checkAlive(const char* op) const {
  if (context_->aborted.load(std::memory_order_acquire))
    return const_cast<Connection*>(this)->fail(tsrRemoteError,
                                               "%s after the communicator was aborted", op);
  if (!context_->alive.load(std::memory_order_acquire))
    return const_cast<Connection*>(this)->fail(
        tsrInvalidArgument, "%s on a connection of a destroyed communicator", op);
  return tsrSuccess;
}

Result Connection::checkRemote(const RemoteMemory& m, const char* op) const {
  auto* self = const_cast<Connection*>(this);
  if (m.importer() != id_)
    return self->fail(tsrInvalidArgument,
                      "%s names memory %u of rank %d that was not imported through this "
                      "connection",
                      op, m.id(), m.ownerRank());
  return tsrSuccess;
}

Result Connection::checkLocal(const Memory& m, const char* op) const {
  if (m.context() != context_)
    return const_cast<Connection*>(this)->fail(
        tsrInvalidArgument, "%s names memory %u that was registered with another communicator", op,
        m.id());
  return tsrSuccess;
}

Result Connection::importMemory(const std::string& blob, std::shared_ptr<RemoteMemory>* out) {
  TSR_CHECK(checkAlive("importMemory"));
  MemoryBlobHeader header;
  std::string section, whyNot;
  Result r = parseMemoryBlob(blob, kind_, &header, &section, &whyNot);
  if (r != tsrSuccess) return addContext(r, "rank %d importing from peer %d", rank(), peer_);
  if (header.contextId != context_->contextId)
    return fail(tsrInvalidArgument,
                "memory blob belongs to another communicator (context %016llx, this one is "
                "%016llx)",
                static_cast<unsigned long long>(header.contextId),
                static_cast<unsigned long long>(context_->contextId));
  if (header.ownerRank != peer_)
    return fail(tsrInvalidArgument, "memory blob was made by rank %d, not by this peer",
                header.ownerRank);
  if (section.empty())
    return fail(tsrInvalidArgument, "memory %u (%s, %llu bytes) cannot be imported: %s",
                header.memoryId, memoryKindName(header.kind),
                static_cast<unsigned long long>(header.size), whyNot.c_str());
  void* mapped = nullptr;
  std::unique_ptr<RemoteMapping> mapping;
  TSR_CHECK(doImport(header, section, &mapped, &mapping));
  *out = std::make_shared<RemoteMemory>(header, mapped, std::move(mapping), id_);
  return tsrSuccess;
}

Result Connection::importMemoryOnce(const std::string& blob, std::shared_ptr<RemoteMemory>* out) {
  TSR_CHECK(checkAlive("importMemory"));
  MemoryBlobHeader header;
  std::string section, whyNot;
  Result r = parseMemoryBlob(blob, kind_, &header, &section, &whyNot);
  if (r != tsrSuccess) return addContext(r, "rank %d importing from peer %d", rank(), peer_);
  // Held across the import, so that two threads asking for one memory import it once.
  std::lock_guard<std::mutex> lock(importsMutex_);
  auto it = imports_.find(header.memoryId);
  if (it != imports_.end()) {
    std::shared_ptr<RemoteMemory> held = it->second.lock();
    // A blob that says anything else about the memory is imported (and checked) afresh.
    if (held) {
      const MemoryBlobHeader& h = held->header();
      if (h.contextId == header.contextId && h.ownerRank == header.ownerRank &&
          h.size == header.size && h.address == header.address && h.kind == header.kind &&
          h.cudaDevice == header.cudaDevice) {
        *out = std::move(held);
        return tsrSuccess;
      }
    }
  }
  std::shared_ptr<RemoteMemory> fresh;
  TSR_CHECK(importMemory(blob, &fresh));
  std::erase_if(imports_, [](const auto& e) { return e.second.expired(); });
  imports_[header.memoryId] = fresh;
  *out = std::move(fresh);
  return tsrSuccess;
}

Result Connection::put(const RemoteMemory& dst, size_t dstOffset, const Memory& src,
                       size_t srcOffset, size_t bytes) {
  TSR_CHECK(checkAlive("put"));
  TSR_CHECK(checkRemote(dst, "put"));
  TSR_CHECK(checkLocal(src, "put"));
  if (!dst.contains(dstOffset, bytes))
    return fail(tsrInvalidArgument,
                "put of %zu bytes at offset %zu does not fit the peer's memory %u of %zu bytes",
                bytes, dstOffset, dst.id(), dst.size());
  if (!src.contains(srcOffset, bytes))
    return fail(tsrInvalidArgument,
                "put of %zu bytes from offset %zu does not fit local memory %u of %zu bytes", bytes,
                srcOffset, src.id(), src.size());
  if (bytes == 0) return tsrSuccess;
  return doPut(dst, dstOffset, src, srcOffset, bytes);
}

Result Connection::put(const RemoteMemory& dst, size_t dstOffset, const void* src, size_t bytes) {
  TSR_CHECK(checkAlive("put"));
  if (src == nullptr) return fail(tsrInvalidArgument, "put from a null source pointer");
  std::shared_ptr<Memory> mem = findRegisteredMemory(*context_, src, bytes);
  if (!mem)
    return fail(tsrInvalidArgument,
                "put source %p (+%zu bytes) lies in no memory registered with this communicator",
                src, bytes);
  return put(dst, dstOffset, *mem,
             reinterpret_cast<uintptr_t>(src) - reinterpret_cast<uintptr_t>(mem->data()), bytes);
}

Result Connection::get(const Memory& dst, size_t dstOffset, const RemoteMemory& src,
                       size_t srcOffset, size_t bytes) {
  TSR_CHECK(checkAlive("get"));
  TSR_CHECK(checkRemote(src, "get"));
  TSR_CHECK(checkLocal(dst, "get"));
  if (!src.contains(srcOffset, bytes))
    return fail(tsrInvalidArgument,
                "get of %zu bytes at offset %zu does not fit the peer's memory %u of %zu bytes",
                bytes, srcOffset, src.id(), src.size());
  if (!dst.contains(dstOffset, bytes))
    return fail(tsrInvalidArgument,
                "get of %zu bytes into offset %zu does not fit local memory %u of %zu bytes", bytes,
                dstOffset, dst.id(), dst.size());
  if (bytes == 0) return tsrSuccess;
  return doGet(dst, dstOffset, src, srcOffset, bytes);
}

Result Connection::atomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value) {
  TSR_CHECK(checkAlive("atomicAdd"));
  TSR_CHECK(checkRemote(dst, "atomicAdd"));
  if (!dst.contains(offset, 8) || (dst.remoteAddress() + offset) % 8 != 0)
    return fail(tsrInvalidArgument,
                "atomicAdd at offset %zu of the peer's memory %u (%zu bytes) is out of range or "
                "not 8-byte aligned",
                offset, dst.id(), dst.size());
  return doAtomicAdd(dst, offset, value);
}

Result Connection::flush() {
  TSR_CHECK(checkAlive("flush"));
  return doFlush(Deadline::after(context_->timeoutSeconds));
}

bool Connection::crossMemory(std::string* whyNot) const {
  if (whyNot != nullptr)
    *whyNot = strprintf("the %s transport has no cross-memory attach", transportName(kind_));
  return false;
}

Result Connection::readPeerAddress(void* dst, uint64_t peerAddress, size_t bytes) {
  TSR_CHECK(checkAlive("readPeerAddress"));
  std::string why;
  if (!crossMemory(&why)) return fail(tsrInvalidUsage, "readPeerAddress: %s", why.c_str());
  if (bytes == 0) return tsrSuccess;
  if (dst == nullptr || peerAddress == 0)
    return fail(tsrInvalidArgument, "readPeerAddress of %zu bytes with a null address", bytes);
  return doCrossRead(dst, peerAddress, bytes);
}

Result Connection::writePeerAddress(uint64_t peerAddress, const void* src, size_t bytes) {
  TSR_CHECK(checkAlive("writePeerAddress"));
  std::string why;
  if (!crossMemory(&why)) return fail(tsrInvalidUsage, "writePeerAddress: %s", why.c_str());
  if (bytes == 0) return tsrSuccess;
  if (src == nullptr || peerAddress == 0)
    return fail(tsrInvalidArgument, "writePeerAddress of %zu bytes with a null address", bytes);
  return doCrossWrite(peerAddress, src, bytes);
}

Result Connection::doCrossRead(void*, uint64_t, size_t) {
  return fail(tsrInternalError, "no cross-memory attach");
}
Result Connection::doCrossWrite(uint64_t, const void*, size_t) {
  return fail(tsrInternalError, "no cross-memory attach");
}

// ---- HostMappedConnection ------------------------------------------------------------------

Result HostMappedConnection::doPut(const RemoteMemory& dst, size_t dstOffset, const Memory& src,
                                   size_t srcOffset, size_t bytes) {
  if (!hostAccessible(dst.kind()) || !hostAccessible(src.kind()))
    return fail(tsrInvalidUsage, "put between %s and %s memory needs a GPU transport",
                memoryKindName(src.kind()), memoryKindName(dst.kind()));
  std::memcpy(static_cast<char*>(dst.mapped()) + dstOffset,
              static_cast<const char*>(src.data()) + srcOffset, bytes);
  return tsrSuccess;
}

Result HostMappedConnection::doGet(const Memory& dst, size_t dstOffset, const RemoteMemory& src,
                                   size_t srcOffset, size_t bytes) {
  if (!hostAccessible(dst.kind()) || !hostAccessible(src.kind()))
    return fail(tsrInvalidUsage, "get between %s and %s memory needs a GPU transport",
                memoryKindName(src.kind()), memoryKindName(dst.kind()));
  std::memcpy(static_cast<char*>(dst.data()) + dstOffset,
              static_cast<const char*>(src.mapped()) + srcOffset, bytes);
  return tsrSuccess;
}

Result HostMappedConnection::doAtomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value) {
  if (!hostAccessible(dst.kind()))
    return fail(tsrInvalidUsage, "atomicAdd on cuda memory needs a GPU transport");
  auto* word = reinterpret_cast<uint64_t*>(static_cast<char*>(dst.mapped()) + offset);
  // Sequentially consistent (on x86-64 the same locked add as release): a semaphore's signaller
  // reads the waiter's parked flag after it (semaphore_device.hpp).
  __atomic_fetch_add(word, value, __ATOMIC_SEQ_CST);
  return tsrSuccess;
}

Result HostMappedConnection::doFlush(const Deadline&) {
  // Stores to a shared mapping are complete once issued; the fence orders them for any reader.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return tsrSuccess;
}

}  // namespace tessera
