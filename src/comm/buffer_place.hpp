// Where a user buffer lives, so the API can send each call to the executor that can run it (the
// host executor reads and writes with plain loads and stores; device memory there would fault).
#pragma once

#include <string>

#include "core/status.hpp"

namespace tessera {

enum class BufferPlace { kHost, kDevice, kManaged };

// kHost for pageable and pinned (registered) host memory, and always in a build without CUDA or
// where no device is usable; kDevice / kManaged (with the device, -1 if unknown) otherwise.
// Never fails: a pointer CUDA does not know is host memory.
BufferPlace bufferPlace(const void* ptr, int* device);

// "host", "device" or "managed".
const char* bufferPlaceName(BufferPlace p);

// Where `ptr` (the API argument `name` of `api`) lives, refusing, with tsrInvalidUsage and a
// sentence, what no executor of a rank on CUDA device `commDevice` (-1: host-only) can run: device
// memory on a host-only rank, device memory of another GPU. *onDevice: device or managed memory.
Result executorPlace(int commDevice, const char* api, const char* name, const void* ptr,
                     bool* onDevice);

}  // namespace tessera
