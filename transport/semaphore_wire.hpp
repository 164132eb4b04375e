// What two ranks send each other to make a semaphore (context_semaphore.cpp), on the bootstrap tag
// transportTag(user tag, TransportTagPurpose::kSemaphore): this hello, then `blobBytes` bytes of
// the blob (Memory::serialize) of the slab that holds the sender's counter. Host byte order: peers
// of one context run one build; the magic and version catch anything else.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

inline constexpr uint32_t kSemaphoreHelloMagic = 0x5453454d;  // "TSEM"
inline constexpr uint32_t kSemaphoreWireVersion = 1;
// A memory blob is a header and one short section per transport; this bounds what a peer's
// number can make this rank allocate.
inline constexpr uint64_t kMaxSemaphoreBlobBytes = uint64_t{1} << 20;

struct SemaphoreHello {
  uint32_t magic;
  uint32_t version;
  uint64_t slotOffset;  // where the sender's 64-byte counter block lies in the slab
  uint64_t blobBytes;   // the slab's blob follows
};
static_assert(sizeof(SemaphoreHello) == 24, "the hello is sent as it is");

}  // namespace tessera
