// Ranks bound to CUDA devices: several ranks sharing one GPU, the current device, and the
// placements every rank sees. Skips with the reason where no GPU is usable.
#include <gtest/gtest.h>

#include <vector>

#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "core/cuda_driver.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {

TEST(GpuComm, SeveralRanksShareOneGpu) {
  TSR_SKIP_WITHOUT_GPU();
  const int n = 4;
  std::vector<int> devs(n, 0);
  std::vector<std::unique_ptr<Communicator>> comms;
  ASSERT_EQ(Communicator::initAll(n, devs.data(), &comms), tsrSuccess) << tsrGetLastError(nullptr);
  CudaDeviceInfo info;
  ASSERT_EQ(cudaGetDeviceInfo(0, &info), tsrSuccess);
  for (int r = 0; r < n; ++r) {
    int dev = -1;
    ASSERT_EQ(comms[static_cast<size_t>(r)]->cuDevice(&dev), tsrSuccess);
    EXPECT_EQ(dev, 0);
    const auto& places = tessera::commImpl(*comms[static_cast<size_t>(r)])->placements();
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(places[static_cast<size_t>(p)].cudaDevice, 0);
      EXPECT_STREQ(places[static_cast<size_t>(p)].busId, info.busId.c_str());
      EXPECT_TRUE(sameGpu(places[static_cast<size_t>(r)], places[static_cast<size_t>(p)]));
    }
  }
}

TEST(GpuComm, CurrentDeviceIsTheDefault) {
  TSR_SKIP_WITHOUT_GPU();
  std::string why;
  int ndev = cudaDeviceCount(&why);
  ASSERT_GT(ndev, 0) << why;
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  std::vector<tsrComm_t> comms(2, nullptr);
  test::runRanks(2, [&](int r) {
    // Each thread picks its own current device; the communicator follows it.
    int want = r % ndev;
    tsrConfig_t config = TSR_CONFIG_INITIALIZER;
    config.device = want;                            // explicit for rank 0 ...
    if (r == 1) config.device = TSR_DEVICE_CURRENT;  // ... and "current" (device 0) for rank 1
    EXPECT_EQ(tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], 2, id, r, &config), tsrSuccess)
        << tsrGetLastError(nullptr);
    int dev = -1;
    EXPECT_EQ(tsrCommCuDevice(comms[static_cast<size_t>(r)], &dev), tsrSuccess);
    EXPECT_EQ(dev, r == 0 ? want : cudaCurrentDevice());
  });
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

TEST(GpuComm, HostOnlyRanksNextToGpuRanks) {
  TSR_SKIP_WITHOUT_GPU();
  int devs[] = {0, TSR_DEVICE_HOST, 0};
  std::vector<std::unique_ptr<Communicator>> comms;
  ASSERT_EQ(Communicator::initAll(3, devs, &comms), tsrSuccess) << tsrGetLastError(nullptr);
  int dev = 0;
  ASSERT_EQ(comms[1]->cuDevice(&dev), tsrSuccess);
  EXPECT_EQ(dev, TSR_DEVICE_HOST);
  EXPECT_STREQ(tessera::commImpl(*comms[0])->placements()[1].busId, "");
}

}  // namespace
}  // namespace tessera
