// The device executor's launch-mode item kernel for a send/recv group (kernels.hpp,
// "sendRecvItem"): the group (P2PGroupDesc) travels by value in the kernel's parameters. A file of
// its own so that its copy of the interpreter compiles in parallel with the others
// (kernels_common.hpp).
#include <cuda_runtime_api.h>

#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/kernels_common.hpp"
#include "collectives/exec/device/kernels_one_item.cuh"

namespace tessera::exec {
namespace {

// The group is a __grid_constant__ parameter: its address is taken without a per-thread copy.
__global__ void __launch_bounds__(devkernels::kThreads, 1)
    sendRecvItemKernel(WorkQueueHandle q, WorkItem item,
                       const __grid_constant__ P2PGroupDesc group) {
  WorkItem it = item;
  it.p2p = &group;
  devkernels::runOneItem(q, it);
}

}  // namespace

const void* devkernels::sendRecvItemKernelFn() {
  return reinterpret_cast<const void*>(&sendRecvItemKernel);
}

Result launchSendRecvItem(const WorkQueueHandle& q, const WorkItem& item, const P2PGroupDesc& group,
                          uint32_t nctas, uint32_t threads, void* stream) {
  TSR_CHECK(devkernels::checkShape("send/recv item", nctas, threads));
  sendRecvItemKernel<<<nctas, threads, 0, static_cast<cudaStream_t>(stream)>>>(q, item, group);
  return devkernels::checkLaunch("send/recv item", nctas, threads);
}

}  // namespace tessera::exec
