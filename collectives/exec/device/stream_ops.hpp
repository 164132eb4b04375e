// Stream memory operations and capture queries for the device executor, through driver entry
// points (core/cuda_driver.hpp: libcuda is never linked). Streams are cudaStream_t as void*.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace tessera::exec {

// Whether cuStreamWaitValue32 / cuStreamWriteValue32 are reachable (driver present, entry points
// found, the device supports stream memory operations); `why` says why not.
bool streamMemOpsAvailable(std::string* why);

// The stream waits until *addr >= value (wrap-aware: (int32_t)(*addr - value) >= 0) when `geq`,
// or until *addr == value otherwise. `addr` is device memory or mapped pinned host memory.
Result streamWaitValue32(void* stream, uint32_t* addr, uint32_t value, bool geq);
// The stream stores `value` to *addr when it reaches this point.
Result streamWriteValue32(void* stream, uint32_t* addr, uint32_t value);

// Whether work launched on `stream` now is being captured into a graph.
Result streamIsCapturing(void* stream, bool* capturing);

}  // namespace tessera::exec
