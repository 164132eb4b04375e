// The device executor's executing side behind one small interface, so that device_executor.cpp
// holds the logic both share (queue layout, shutdown protocol, binding, items, errors) and each
// side says once how it does what differs:
//   emulated (executing_side_host.cpp): host memory, the resident CTAs as host threads, items
//     posted and launch-mode grids run from the calling thread;
//   CUDA (executing_side_cuda.cpp): device and mapped pinned memory, the resident kernel on a
//     stream of its own, triggers and stream waits on the caller's stream, graph call sites.
// Internal to collectives/exec/device.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/device/work_queue.hpp"

namespace tessera {

// What the executor and its side share: the queue and the eager calls' completion.
struct HostQueue {
  exec::WorkQueueHandle q{};
  uint32_t* eagerWord = nullptr;
  uint32_t ticket = 0;    // the last eager call's done value
  uint64_t lastCall = 0;  // the engine's number of the last call
};

// Held for a scope in which the side's device must be current (nothing in the emulation).
class SideScope {
 public:
  virtual ~SideScope() = default;
};

class ExecutingSide {
 public:
  virtual ~ExecutingSide() = default;
  virtual std::unique_ptr<SideScope> enter() = 0;
  // The queue's two blocks, zeroed: `dev` (items, counters, grid barrier: device memory on a GPU)
  // and `shared` (error record, flags, eager word: memory the host and the kernels both reach).
  virtual Result allocateQueue(size_t deviceBytes, size_t hostBytes, char** dev, char** shared) = 0;
  // Persistent mode: starts the resident grid on the queue (after allocateQueue).
  virtual Result startResident() = 0;
  // Whether the resident grid has ended (one look; true when none was started).
  virtual bool gridEnded() = 0;
  // Posts the stop item behind the calls made so far.
  virtual void postStop() = 0;
  // The grid did not end: leave what may still run as it is (its memory is leaked).
  virtual void abandon() = 0;
  // The grid ended: wait for the side's own work (threads, streams), then, after the executor
  // released the plans, free the queue and everything else of the side.
  virtual void quiesce() = 0;
  virtual void release() = 0;
  // Copies host bytes into memory the executing side reaches (zeroes when `src` is null).
  virtual Result upload(void* dst, const void* src, size_t bytes) = 0;
  // Posts a filled item on `stream` (DeviceExecutor::post), setting its done word and value.
  virtual Result post(exec::WorkItem item, void* stream, const exec::P2PGroupDesc* group,
                      exec::P2PGroupDesc* groups) = 0;
  // Whether work launched on `stream` now is captured into a graph (never, in the emulation).
  virtual Result capturing(void* stream, bool* out) = 0;
  // A failure of the executing side itself (the resident kernel's), beside the error record:
  // tsrSuccess while none, else its code with the sentence in `why`.
  virtual Result ownFailure(std::string* why) = 0;
};

std::unique_ptr<ExecutingSide> makeHostSide(const DeviceExecutorOptions& options, HostQueue& hq);
// Fails with a sentence in a build without CUDA.
Result makeCudaSide(const DeviceExecutorOptions& options, HostQueue& hq,
                    std::unique_ptr<ExecutingSide>* out);

inline double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace tessera
