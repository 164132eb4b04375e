// p2p between thread ranks of this process: 2 and 4 ranks sharing GPU 0 (VMM and cudaMalloc
// memory), ranks on separate GPUs where there are several, and the FIFO and semaphore device
// handles without a proxy. Skips with the reason where no GPU is usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda_driver.hpp"
#include "gpu_transport_body.hpp"
#include "gpu_transport_kernels.hpp"
#include "support/harness.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::test {
namespace {

void runP2p(int nranks, std::vector<int> devices, bool legacy) {
  RankOptions options;
  options.cudaDevices = std::move(devices);
  GpuRoundTrip trip;
  trip.kind = TransportKind::kP2p;
  trip.autoSelect = !legacy;  // the selection must pick p2p by itself; forced for the other
  trip.legacyAllocation = legacy;
  auto results = runTransportRanks(
      RankMode::kThreads, nranks,
      [&](TransportContext& ctx) { return gpuTransportRoundTrip(ctx, trip); }, options);
  expectAllRanksOk(results);
}

TEST(GpuP2p, TwoThreadRanksShareGpu0) {
  TSR_SKIP_WITHOUT_GPU();
  runP2p(2, {0}, false);
}

TEST(GpuP2p, FourThreadRanksShareGpu0) {
  TSR_SKIP_WITHOUT_GPU();
  runP2p(4, {0}, false);
}

TEST(GpuP2p, CudaMallocMemory) {
  TSR_SKIP_WITHOUT_GPU();
  runP2p(2, {0}, true);
}

TEST(GpuP2p, SeparateGpus) {
  TSR_SKIP_WITHOUT_GPU();
  std::string why;
  int n = cudaDeviceCount(&why);
  if (n < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << n;
  std::vector<int> devices;
  for (int d = 0; d < n && d < 4; ++d) devices.push_back(d);
  runP2p(static_cast<int>(devices.size()), devices, false);
}

TEST(GpuDeviceHandles, FifoAndSemaphoreWithoutProxy) {
  TSR_SKIP_WITHOUT_GPU();
  EXPECT_EQ(runFifoAndSemaphoreKernel(0, 100, 20), "");
}

}  // namespace
}  // namespace tessera::test
