// Host-callable entry points of the device executor's CUDA kernels (kernels.cu and the
// kernels_*.cu files beside it, one per kernel that runs the interpreter, see kernels_common.hpp;
// kernels_none.cpp in a build without CUDA, where every function fails with a sentence saying
// so). Streams are cudaStream_t passed as void*, so that host code including this header needs no
// CUDA header.
//
// Kernels:
//   resident  runScheduler<BlockGroup> over DeviceItemRunner: the persistent grid (one per
//             communicator, on its own non-blocking stream), until a stop.
//   trigger   one thread: optionally stores 0 to item.doneWord (graph call sites, see
//             device_executor.cpp), then postItem(). Launched on the caller's stream, so the
//             item is posted when the stream reaches the call; capturable, and a replay posts anew.
//   item      launch mode: a fresh grid runs one item (DeviceItemRunner) and ends; the
//             queue's error record, flags and grid barrier are used, its ring is not.
//   sendRecvTrigger, sendRecvItem
//             the same two for a kItemP2P item, whose group (P2PGroupDesc) travels by value in
//             the kernel's parameters (__grid_constant__): the trigger copies it into `groups`
//             (the executor's group ring, one entry per queue slot) as it posts the item; the
//             item kernel points the item at its parameter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/exec/device/work_queue.hpp"
#include "core/status.hpp"

namespace tessera::exec {

// Whether this build compiled the kernels (CUDA built in).
bool deviceKernelsBuilt();

// Loads every kernel listed above now. With lazy module loading (CUDA 12.2+ default) the first
// launch of a kernel loads its module, and a load may wait for the device to go idle, which it
// never does while a resident kernel runs: the executor preloads before it starts one.
Result preloadDeviceKernels();

// `first`: the sequence number of the first item this grid takes (the host's count of items taken
// by earlier grids: 0, or one past the stop item that ended the previous grid).
Result launchResident(const WorkQueueHandle& q, uint64_t first, uint32_t nctas, uint32_t threads,
                      void* stream);
Result launchTrigger(const WorkQueueHandle& q, const WorkItem& item, bool resetDone, void* stream);
Result launchItem(const WorkQueueHandle& q, const WorkItem& item, uint32_t nctas, uint32_t threads,
                  void* stream);
Result launchSendRecvTrigger(const WorkQueueHandle& q, const WorkItem& item, P2PGroupDesc* groups,
                             const P2PGroupDesc& group, bool resetDone, void* stream);
Result launchSendRecvItem(const WorkQueueHandle& q, const WorkItem& item, const P2PGroupDesc& group,
                          uint32_t nctas, uint32_t threads, void* stream);

// How many CTAs of `threads` threads of the resident kernel one multiprocessor holds at once
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor), and the device's multiprocessors: every
// resident grid on a GPU must fit at once (DeviceExecutor's check before a launch).
Result residentKernelOccupancy(int device, uint32_t threads, int* ctasPerSm, int* sms);

// Per-kernel resources from cudaFuncGetAttributes (for tessera_info and the no-spill test):
// registers per thread, local (stack + spill) bytes per thread, max threads per block.
struct DeviceKernelInfo {
  std::string name;
  int registers = 0;
  size_t localBytes = 0;
  int maxThreads = 0;
};
Result deviceKernelInfo(std::vector<DeviceKernelInfo>* out);

}  // namespace tessera::exec
