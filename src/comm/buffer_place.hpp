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

}  // namespace tessera
