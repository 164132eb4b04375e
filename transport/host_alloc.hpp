// Host memory that other processes of the host can map (tsrMemAlloc): a memfd per allocation,
// remembered in a process-wide table so that registering a pointer inside it (tsrCommRegister,
// TransportContext::registerMemory) gives a Memory the shm transport can export. Memory from
// malloc cannot be shared that way; it stays usable by threads (inproc) and UCX.
#pragma once

#include <cstddef>

#include "core/status.hpp"

namespace tessera {

// Page-aligned, zero-filled, MAP_SHARED memory of at least `bytes` (> 0) bytes.
Result sharedHostAlloc(size_t bytes, void** ptr);
// tsrInvalidArgument when `ptr` is not the start of a live allocation.
Result sharedHostFree(void* ptr);

struct SharedHostRegion {
  void* base = nullptr;  // start of the allocation
  size_t bytes = 0;      // its mapped length
  int fd = -1;           // a NEW descriptor (dup) the caller owns and must close
};
// True when [ptr, ptr + bytes) lies inside one live allocation; fills `out` (with a dup'ed fd).
bool sharedHostLookup(const void* ptr, size_t bytes, SharedHostRegion* out);

}  // namespace tessera
