// The device executor's trigger kernels and what the kernel files share (kernels.hpp,
// kernels_common.hpp): the one-thread trigger that posts an item in stream order (also in a
// send/recv form that carries a group in its parameters), the launch checks, and the table of
// every kernel for preloading and tessera's resource listing. The kernels that run the interpreter
// live in kernels_resident.cu, kernels_item.cu and kernels_sendrecv_item.cu, one file each, so
// that they compile in parallel. The logic is all in work_queue.hpp, item_runner.hpp and what it
// runs (__host__ __device__, tested on the CPU); these files only instantiate it on BlockGroup and
// launch it.
#include <cuda_runtime_api.h>

#include <array>

#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/kernels_common.hpp"
#include "collectives/exec/device/work_queue.hpp"
#include "core/build_config.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/device_guard.hpp"

namespace tessera::exec {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

__global__ void triggerKernel(WorkQueueHandle q, WorkItem item, bool resetDone) {
  // Graph call sites: the done word goes back to 0 before the item exists, so the stream's wait
  // for == 1 after this kernel is satisfied only by this replay's completion. The store is
  // ordered before the post's release of the slot, which the completing CTA acquires.
  if (resetDone && item.doneWord != nullptr) storeRelease32(item.doneWord, 0);
  postItem(q, item);
}

// A send/recv group's trigger (kernels.hpp). The group is a __grid_constant__ parameter: its
// address is taken without a per-thread copy.
__global__ void sendRecvTriggerKernel(WorkQueueHandle q, WorkItem item, P2PGroupDesc* groups,
                                      const __grid_constant__ P2PGroupDesc group, bool resetDone) {
  if (resetDone && item.doneWord != nullptr) storeRelease32(item.doneWord, 0);
  postItem(q, item, groups, &group);
}

struct KernelEntry {
  const char* name;
  const void* fn;
};

// Every kernel of the executor, in kernels.hpp's order. Built at each call: the interpreter
// kernels are other files' objects (kernels_common.hpp).
std::array<KernelEntry, 5> kernels() {
  return {{
      {"resident", devkernels::residentKernelFn()},
      {"trigger", reinterpret_cast<const void*>(&triggerKernel)},
      {"item", devkernels::itemKernelFn()},
      {"send/recv trigger", reinterpret_cast<const void*>(&sendRecvTriggerKernel)},
      {"send/recv item", devkernels::sendRecvItemKernelFn()},
  }};
}

}  // namespace

Result devkernels::checkLaunch(const char* kernel, uint32_t nctas, uint32_t threads) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "launching the device executor's %s kernel (%u CTAs x %u threads) failed: %s",
                    kernel, nctas, threads, cudaErrorText(e).c_str());
  return tsrSuccess;
}

Result devkernels::checkShape(const char* kernel, uint32_t nctas, uint32_t threads) {
  if (nctas == 0 || threads == 0 || threads > kThreads)
    return TSR_FAIL(tsrInvalidArgument,
                    "the device executor's %s kernel needs 1 or more CTAs of 1 to %u threads, "
                    "not %u CTAs of %u threads",
                    kernel, kThreads, nctas, threads);
  return tsrSuccess;
}

bool deviceKernelsBuilt() { return true; }

Result preloadDeviceKernels() {
  // cudaFuncGetAttributes needs the function's module loaded, so with lazy loading it loads it
  // now, while no resident kernel keeps the device busy. Each kernel file is a module of its own.
  for (const KernelEntry& k : kernels()) {
    cudaFuncAttributes attr{};
    cudaError_t e = cudaFuncGetAttributes(&attr, k.fn);
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError,
                      "loading the device executor's %s kernel (built for sm %s) failed: %s",
                      k.name, TESSERA_CUDA_ARCHS, cudaErrorText(e).c_str());
  }
  return tsrSuccess;
}

Result launchTrigger(const WorkQueueHandle& q, const WorkItem& item, bool resetDone, void* stream) {
  triggerKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(q, item, resetDone);
  return devkernels::checkLaunch("trigger", 1, 1);
}

Result launchSendRecvTrigger(const WorkQueueHandle& q, const WorkItem& item, P2PGroupDesc* groups,
                             const P2PGroupDesc& group, bool resetDone, void* stream) {
  sendRecvTriggerKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(q, item, groups, group,
                                                                        resetDone);
  return devkernels::checkLaunch("send/recv trigger", 1, 1);
}

Result residentKernelOccupancy(int device, uint32_t threads, int* ctasPerSm, int* sms) {
  CudaDeviceGuard guard(device);
  cudaError_t e = guard.status();
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctasPerSm, devkernels::residentKernelFn(),
                                                      static_cast<int>(threads), 0);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "the resident kernel's occupancy on device %d (%u threads per CTA): %s", device,
                    threads, cudaErrorText(e).c_str());
  return tsrSuccess;
}

Result deviceKernelInfo(std::vector<DeviceKernelInfo>* out) {
  out->clear();
  for (const KernelEntry& k : kernels()) {
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
