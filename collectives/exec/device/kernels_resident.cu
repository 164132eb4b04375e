// The device executor's resident kernel (kernels.hpp): the persistent grid of a communicator,
// runScheduler over DeviceItemRunner on BlockGroup until a stop, and its launcher. A file of its
// own so that its copy of the interpreter compiles in parallel with the others
// (kernels_common.hpp).
#include <cuda_runtime_api.h>

#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/item_runner.hpp"
#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/kernels_common.hpp"
#include "collectives/exec/device/work_queue.hpp"

namespace tessera::exec {
namespace {

__global__ void __launch_bounds__(devkernels::kThreads, 1)
    residentKernel(WorkQueueHandle q, uint64_t first) {
  BlockGroup g;
  DeviceItemRunner<BlockGroup> r{q};
  runScheduler(q, g, blockIdx.x, gridDim.x, first, r);
}

}  // namespace

const void* devkernels::residentKernelFn() {
  return reinterpret_cast<const void*>(&residentKernel);
}

Result launchResident(const WorkQueueHandle& q, uint64_t first, uint32_t nctas, uint32_t threads,
                      void* stream) {
  TSR_CHECK(devkernels::checkShape("resident", nctas, threads));
  residentKernel<<<nctas, threads, 0, static_cast<cudaStream_t>(stream)>>>(q, first);
  return devkernels::checkLaunch("resident", nctas, threads);
}

}  // namespace tessera::exec
