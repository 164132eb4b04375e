// The device executor's launch-mode item kernel (kernels.hpp): a fresh grid runs one item and
// ends. A file of its own so that its copy of the interpreter compiles in parallel with the others
// (kernels_common.hpp).
#include <cuda_runtime_api.h>

#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/kernels_common.hpp"
#include "collectives/exec/device/kernels_one_item.cuh"

namespace tessera::exec {
namespace {

__global__ void __launch_bounds__(devkernels::kThreads, 1)
    itemKernel(WorkQueueHandle q, WorkItem item) {
  devkernels::runOneItem(q, item);
}

}  // namespace

const void* devkernels::itemKernelFn() { return reinterpret_cast<const void*>(&itemKernel); }

Result launchItem(const WorkQueueHandle& q, const WorkItem& item, uint32_t nctas, uint32_t threads,
                  void* stream) {
  TSR_CHECK(devkernels::checkShape("item", nctas, threads));
  itemKernel<<<nctas, threads, 0, static_cast<cudaStream_t>(stream)>>>(q, item);
  return devkernels::checkLaunch("item", nctas, threads);
}

}  // namespace tessera::exec
