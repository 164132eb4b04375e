// TransportContext's semaphores (context.hpp): counters carved out of shared slabs, and the
// pairwise exchange that tells each side where the other's counter is (DESIGN.md, "Transport").
//
// Why slabs: a semaphore used to be one registered allocation (a memfd for host memory, a 2 MiB
// cuMem allocation with an exported descriptor for device memory), exported to and imported by
// the peer. A communicator of 8 ranks with a few plans makes thousands of semaphores per rank,
// which ran out of a 1,024-descriptor limit and wasted 2 MiB of device memory each. Now the
// context keeps one slab per memory kind (64 KiB of host memory, 1,024 slots; one 2 MiB VMM
// granule of device memory, 32,768 slots) and hands out 64-byte slots of it in turn. The slab is
// an ordinary Memory: exported once (its descriptor offered once), and a peer's connection
// imports it once however many of its slots that peer's semaphores use (importMemoryOnce).
//
// Slots are never reused. Letting go of a semaphore is local, not pairwise: the peer may still
// hold its end and signal it later, adding to the counter in the freed slot. A new semaphore in
// that slot would count those adds as its own (and its new peer starts counting from zero, so it
// could not even tell them apart by value). So a slot, once taken, belongs to its semaphore until
// the slab goes; the slab is freed when the context has moved on to a fresh one and the last
// semaphore holding it is gone, and a late add then lands in pages only the late peer's mapping
// keeps alive, where nobody reads it. A slab is at most 64 KiB (host) or one granule (device)
// held by a live semaphore, so never reusing wastes little.
#include <cstring>

#include "transport/context.hpp"
#include "transport/semaphore.hpp"
#include "transport/semaphore_wire.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

// Slab sizes. Device memory comes in VMM granules (2 MiB on H100/H200): a smaller slab would
// still cost one.
constexpr size_t kHostSlabBytes = size_t{64} << 10;
constexpr size_t kCudaSlabBytes = size_t{2} << 20;

}  // namespace

Result TransportContext::takeSemaphoreSlot(MemoryKind kind, std::shared_ptr<Memory>* slab,
                                           size_t* offset) {
  std::lock_guard<std::mutex> lock(slabMutex_);
  SemaphoreSlab& s = slabs_[static_cast<size_t>(kind)];
  if (!s.memory || s.next + Semaphore::kBytes > s.memory->size()) {
    std::shared_ptr<Memory> fresh;
    size_t bytes = kind == MemoryKind::kCuda ? kCudaSlabBytes : kHostSlabBytes;
    Result r = allocate(bytes, kind, &fresh);
    if (r != tsrSuccess)
      return addContext(r, "rank %d: a %zu-byte slab of %s memory for semaphores", state_->rank,
                        bytes, memoryKindName(kind));
    // The old slab stays alive as long as semaphores hold it.
    s.memory = std::move(fresh);
    s.next = 0;
  }
  *slab = s.memory;
  *offset = s.next;
  s.next += Semaphore::kBytes;
  return tsrSuccess;
}

Result TransportContext::createSemaphore(const std::shared_ptr<Connection>& connection,
                                         std::shared_ptr<Semaphore>* out, int tag) {
  if (!connection) return TSR_FAIL(tsrInvalidArgument, "createSemaphore with a null connection");
  if (connection->context() != state_)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: createSemaphore with a connection of another communicator",
                    state_->rank);
  if (tag < 0 || tag > kMaxTransportUserTag)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: createSemaphore tag %d outside 0..%d",
                    state_->rank, tag, kMaxTransportUserTag);
  MemoryKind kind = MemoryKind::kHost;
  if (connection->kind() == TransportKind::kCudaIpc || connection->kind() == TransportKind::kP2p)
    kind = MemoryKind::kCuda;
  else if (state_->cudaDevice >= 0)
    kind = MemoryKind::kCudaPinnedHost;  // the GPU waits on it; the peer's proxy adds to it
  std::shared_ptr<Memory> slab;
  size_t offset = 0;
  TSR_CHECK(takeSemaphoreSlot(kind, &slab, &offset));

  // Each side sends where its counter is: the slab's blob (a peer that already imported the slab
  // reuses that import) and the slot's offset in it.
  const int peer = connection->peer();
  std::string blob;
  TSR_CHECK(slab->serialize(&blob));
  SemaphoreHello mine{};
  mine.magic = kSemaphoreHelloMagic;
  mine.version = kSemaphoreWireVersion;
  mine.slotOffset = offset;
  mine.blobBytes = blob.size();
  Bootstrap& b = *bootstrap_;
  const int wireTag = transportTag(tag, TransportTagPurpose::kSemaphore);
  TSR_CHECK(b.send(peer, wireTag, &mine, sizeof mine));
  TSR_CHECK(b.send(peer, wireTag, blob.data(), blob.size()));
  SemaphoreHello theirs{};
  TSR_CHECK(b.recv(peer, wireTag, &theirs, sizeof theirs));
  if (theirs.magic != kSemaphoreHelloMagic || theirs.version != kSemaphoreWireVersion ||
      theirs.blobBytes == 0 || theirs.blobBytes > kMaxSemaphoreBlobBytes)
    return TSR_FAIL(tsrInternalError,
                    "rank %d: the semaphore hello from peer %d is malformed (magic %08x, version "
                    "%u, a %llu-byte memory blob; expected %08x, version %u, 1 to %llu bytes)",
                    state_->rank, peer, theirs.magic, theirs.version,
                    static_cast<unsigned long long>(theirs.blobBytes), kSemaphoreHelloMagic,
                    kSemaphoreWireVersion, static_cast<unsigned long long>(kMaxSemaphoreBlobBytes));
  std::string peerBlob(theirs.blobBytes, '\0');
  TSR_CHECK(b.recv(peer, wireTag, peerBlob.data(), peerBlob.size()));
  std::shared_ptr<RemoteMemory> remote;
  Result r = connection->importMemoryOnce(peerBlob, &remote);
  if (r != tsrSuccess) return addContext(r, "creating a semaphore");
  if (theirs.slotOffset % Semaphore::kBytes != 0 ||
      !remote->contains(theirs.slotOffset, Semaphore::kBytes))
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: peer %d put its semaphore counter at offset %llu of its %zu-byte "
                    "memory %u, which is not a %zu-byte slot inside it",
                    state_->rank, peer, static_cast<unsigned long long>(theirs.slotOffset),
                    remote->size(), remote->id(), Semaphore::kBytes);
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = nextSemaphoreId_++;
  }
  *out = std::make_shared<Semaphore>(id, connection, std::move(slab), offset, std::move(remote),
                                     static_cast<size_t>(theirs.slotOffset));
  return tsrSuccess;
}

}  // namespace tessera
