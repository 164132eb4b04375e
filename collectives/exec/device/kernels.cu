// The device executor's CUDA kernels (kernels.hpp): the resident scheduler grid, the one-thread
// trigger that posts an item in stream order, and the per-call item grid of launch mode (the last
// two also in a send/recv form that carries a group in its parameters). The logic is all in
// work_queue.hpp, item_runner.hpp and what it runs (__host__ __device__, tested on the CPU); this
// file only instantiates it on BlockGroup and launches it.
//
// Thread bound: the resident and item kernels are compiled with __launch_bounds__(kThreads, 1)
// (256, the executor's default CTA size). At 512 the bound capped registers at 128 per thread and
// ptxas spilled 16-24 bytes in the interpreter (sm_80, sm_90); at 256 it may use up to 255. A
// launch with more threads than the bound would fail in the driver, so the launchers refuse it
// first with a sentence. The no-spill check
// (tests/unit/collectives/device_spill.cmake) reads ptxas's report of exactly these kernels.
#include <cuda_runtime_api.h>

#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/item_runner.hpp"
#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "core/build_config.hpp"
#include "core/cuda/cuda_check.hpp"

namespace tessera::exec {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// Most threads per CTA of the resident and item kernels (their __launch_bounds__).
constexpr uint32_t kThreads = 256;

__global__ void __launch_bounds__(kThreads, 1) residentKernel(WorkQueueHandle q, uint64_t first) {
  BlockGroup g;
  DeviceItemRunner<BlockGroup> r{q};
  runScheduler(q, g, blockIdx.x, gridDim.x, first, r);
}

__global__ void triggerKernel(WorkQueueHandle q, WorkItem item, bool resetDone) {
  // Graph call sites: the done word goes back to 0 before the item exists, so the stream's wait
  // for == 1 after this kernel is satisfied only by this replay's completion. The store is
  // ordered before the post's release of the slot, which the completing CTA acquires.
  if (resetDone && item.doneWord != nullptr) storeRelease32(item.doneWord, 0);
  postItem(q, item);
}

// Launch mode: the grid runs one item as the resident grid would (the same dead-queue check,
// runner, closing barrier and error record), and the kernel's end is the completion.
__device__ __forceinline__ void runOneItem(const WorkQueueHandle& q, const WorkItem& item) {
  BlockGroup g;
  DeviceItemRunner<BlockGroup> r{q};
  const uint32_t cta = blockIdx.x;
  bool ok = !g.broadcast(g.leader() && queueFailed(q));
  if (ok) ok = r.runItem(item, g, cta, gridDim.x);
  if (ok) ok = gridBarrier(q, g, gridDim.x, item.seq, item.callNo, static_cast<int32_t>(cta));
  if (!ok && g.leader() && device::loadAcquire(&q.error->code) == 0)
    recordError(q, 6 /* tsrRemoteError */, loadAcquire32(q.abortFlag) ? kWhyAbort : kWhyEarlier,
                item.seq, item.callNo, static_cast<int32_t>(cta), -1, -1, -1);
}

__global__ void __launch_bounds__(kThreads, 1) itemKernel(WorkQueueHandle q, WorkItem item) {
  runOneItem(q, item);
}

// A send/recv group's trigger and launch-mode item (kernels.hpp). The group is a __grid_constant__
// parameter: its address is taken without a per-thread copy.
__global__ void sendRecvTriggerKernel(WorkQueueHandle q, WorkItem item, P2PGroupDesc* groups,
                                      const __grid_constant__ P2PGroupDesc group, bool resetDone) {
  if (resetDone && item.doneWord != nullptr) storeRelease32(item.doneWord, 0);
  postItem(q, item, groups, &group);
}

__global__ void __launch_bounds__(kThreads, 1)
    sendRecvItemKernel(WorkQueueHandle q, WorkItem item,
                       const __grid_constant__ P2PGroupDesc group) {
  WorkItem it = item;
  it.p2p = &group;
  runOneItem(q, it);
}

Result checkLaunch(const char* kernel, uint32_t nctas, uint32_t threads) {
  // Launches are asynchronous: this reports configuration errors (and any sticky error of the
  // context); a fault inside the kernel shows up in the queue's error record or a later call.
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "launching the device executor's %s kernel (%u CTAs x %u threads) failed: %s",
                    kernel, nctas, threads, cudaErrorText(e).c_str());
  return tsrSuccess;
}

Result checkShape(const char* kernel, uint32_t nctas, uint32_t threads) {
  if (nctas == 0 || threads == 0 || threads > kThreads)
    return TSR_FAIL(tsrInvalidArgument,
                    "the device executor's %s kernel needs 1 or more CTAs of 1 to %u threads, "
                    "not %u CTAs of %u threads",
                    kernel, kThreads, nctas, threads);
  return tsrSuccess;
}

struct KernelEntry {
  const char* name;
  const void* fn;
};

const KernelEntry kKernels[] = {
    {"resident", reinterpret_cast<const void*>(&residentKernel)},
    {"trigger", reinterpret_cast<const void*>(&triggerKernel)},
    {"item", reinterpret_cast<const void*>(&itemKernel)},
    {"send/recv trigger", reinterpret_cast<const void*>(&sendRecvTriggerKernel)},
    {"send/recv item", reinterpret_cast<const void*>(&sendRecvItemKernel)},
};

}  // namespace

bool deviceKernelsBuilt() { return true; }

Result preloadDeviceKernels() {
  // cudaFuncGetAttributes needs the function's module loaded, so with lazy loading it loads it
  // now, while no resident kernel keeps the device busy.
  for (const KernelEntry& k : kKernels) {
    cudaFuncAttributes attr{};
    cudaError_t e = cudaFuncGetAttributes(&attr, k.fn);
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError,
                      "loading the device executor's %s kernel (built for sm %s) failed: %s",
                      k.name, TESSERA_CUDA_ARCHS, cudaErrorText(e).c_str());
  }
  return tsrSuccess;
}

Result launchResident(const WorkQueueHandle& q, uint64_t first, uint32_t nctas, uint32_t threads,
                      void* stream) {
  TSR_CHECK(checkShape("resident", nctas, threads));
  residentKernel<<<nctas, threads, 0, static_cast<cudaStream_t>(stream)>>>(q, first);
  return checkLaunch("resident", nctas, threads);
}

Result launchTrigger(const WorkQueueHandle& q, const WorkItem& item, bool resetDone, void* stream) {
  triggerKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(q, item, resetDone);
  return checkLaunch("trigger", 1, 1);
}

Result launchItem(const WorkQueueHandle& q, const WorkItem& item, uint32_t nctas, uint32_t threads,
                  void* stream) {
  TSR_CHECK(checkShape("item", nctas, threads));
  itemKernel<<<nctas, threads, 0, static_cast<cudaStream_t>(stream)>>>(q, item);
  return checkLaunch("item", nctas, threads);
}

Result launchSendRecvTrigger(const WorkQueueHandle& q, const WorkItem& item, P2PGroupDesc* groups,
                             const P2PGroupDesc& group, bool resetDone, void* stream) {
  sendRecvTriggerKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(q, item, groups, group,
                                                                        resetDone);
  return checkLaunch("send/recv trigger", 1, 1);
}

Result launchSendRecvItem(const WorkQueueHandle& q, const WorkItem& item, const P2PGroupDesc& group,
                          uint32_t nctas, uint32_t threads, void* stream) {
  TSR_CHECK(checkShape("send/recv item", nctas, threads));
  sendRecvItemKernel<<<nctas, threads, 0, static_cast<cudaStream_t>(stream)>>>(q, item, group);
  return checkLaunch("send/recv item", nctas, threads);
}

Result deviceKernelInfo(std::vector<DeviceKernelInfo>* out) {
  out->clear();
  for (const KernelEntry& k : kKernels) {
    cudaFuncAttributes attr{};
    cudaError_t e = cudaFuncGetAttributes(&attr, k.fn);
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError,
                      "cudaFuncGetAttributes of the device executor's %s kernel failed: %s", k.name,
                      cudaErrorText(e).c_str());
    DeviceKernelInfo info;
    info.name = k.name;
    info.registers = attr.numRegs;
    info.localBytes = attr.localSizeBytes;
    info.maxThreads = attr.maxThreadsPerBlock;
    out->push_back(std::move(info));
  }
  return tsrSuccess;
}

}  // namespace tessera::exec
