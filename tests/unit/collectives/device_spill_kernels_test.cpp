// The host-side behaviour of the device executor's kernel launchers and stream operations
// (kernels.hpp, stream_ops.hpp) that needs no GPU: what a build without CUDA answers, and that
// a launch shape the kernels were not compiled for is refused before anything reaches the driver.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/stream_ops.hpp"
#include "core/build_config.hpp"
#include "core/status.hpp"
#include "support/harness.hpp"

namespace tessera::exec {
namespace {

bool lastErrorHas(const char* text) {
  return std::string(lastErrorMessage()).find(text) != std::string::npos;
}

// Ranks sharing a GPU: every resident grid must be resident at once. 8 thread ranks of 2 CTAs on
// an H200 (132 multiprocessors, one 256-thread CTA each at 168 registers) fit; 70 ranks do not,
// and the refusal says why and what to change, before any launch.
TEST(DeviceKernels, ResidentGridsThatCannotAllBeResidentAreRefused) {
  EXPECT_EQ(residentGridFits(0, 0, 2, 14, 132, 1, 256), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(residentGridFits(0, 0, 2, 130, 132, 1, 256), tsrSuccess) << lastErrorMessage();
  clearLastError();
  EXPECT_EQ(residentGridFits(3, 0, 2, 138, 132, 1, 256), tsrInvalidUsage);
  EXPECT_TRUE(lastErrorHas("rank 3: device 0 holds 132 resident CTAs")) << lastErrorMessage();
  EXPECT_TRUE(lastErrorHas("140 (138 already running, 2 for this communicator)"))
      << lastErrorMessage();
  EXPECT_TRUE(lastErrorHas("TESSERA_MAX_CTAS")) << lastErrorMessage();
  EXPECT_EQ(residentGridFits(0, 1, 1, 0, 132, 0, 1024), tsrInvalidUsage);
  EXPECT_TRUE(lastErrorHas("does not fit one multiprocessor of device 1")) << lastErrorMessage();
}

TEST(DeviceKernels, BuiltExactlyWhenCudaIs) {
  EXPECT_EQ(deviceKernelsBuilt(), TESSERA_HAVE_CUDA != 0);
}

TEST(DeviceKernels, WithoutCudaEveryLaunchSaysSo) {
  if (TESSERA_HAVE_CUDA) GTEST_SKIP() << "this build has CUDA";
  WorkQueueHandle q{};
  WorkItem item{};
  clearLastError();
  EXPECT_EQ(launchResident(q, 0, 2, 512, nullptr), tsrInvalidUsage);
  EXPECT_TRUE(lastErrorHas("CUDA was not built in")) << lastErrorMessage();
  EXPECT_EQ(launchTrigger(q, item, false, nullptr), tsrInvalidUsage);
  EXPECT_EQ(launchItem(q, item, 2, 512, nullptr), tsrInvalidUsage);
  EXPECT_EQ(preloadDeviceKernels(), tsrInvalidUsage);
  std::vector<DeviceKernelInfo> info(1);
  EXPECT_EQ(deviceKernelInfo(&info), tsrSuccess);
  EXPECT_TRUE(info.empty());
}

TEST(DeviceKernels, WithoutCudaStreamOperationsSaySo) {
  if (TESSERA_HAVE_CUDA) GTEST_SKIP() << "this build has CUDA";
  std::string why;
  EXPECT_FALSE(streamMemOpsAvailable(&why));
  EXPECT_NE(why.find("CUDA was not built in"), std::string::npos) << why;
  uint32_t word = 0;
  bool capturing = true;
  EXPECT_EQ(streamWaitValue32(nullptr, &word, 1, true), tsrInvalidUsage);
  EXPECT_EQ(streamWriteValue32(nullptr, &word, 1), tsrInvalidUsage);
  EXPECT_EQ(streamIsCapturing(nullptr, &capturing), tsrInvalidUsage);
  EXPECT_EQ(word, 0u);
}

// The resident and item kernels are compiled with __launch_bounds__(256, 1): more threads, or no
// CTA at all, is refused with a sentence (the driver would fail the launch less clearly). Each
// launcher lives in its kernel's own file (kernels_common.hpp), so each is asked.
TEST(DeviceKernels, ShapesBeyondTheLaunchBoundAreRefused) {
  if (!TESSERA_HAVE_CUDA) GTEST_SKIP() << "this build has no CUDA";
  WorkQueueHandle q{};
  WorkItem item{};
  P2PGroupDesc group{};
  clearLastError();
  EXPECT_EQ(launchResident(q, 0, 2, 1024, nullptr), tsrInvalidArgument);
  EXPECT_TRUE(lastErrorHas("1 to 256 threads")) << lastErrorMessage();
  EXPECT_EQ(launchResident(q, 0, 0, 256, nullptr), tsrInvalidArgument);
  EXPECT_EQ(launchItem(q, item, 2, 0, nullptr), tsrInvalidArgument);
  EXPECT_EQ(launchItem(q, item, 2, 257, nullptr), tsrInvalidArgument);
  EXPECT_EQ(launchSendRecvItem(q, item, group, 2, 257, nullptr), tsrInvalidArgument);
  EXPECT_TRUE(lastErrorHas("send/recv item kernel")) << lastErrorMessage();
  EXPECT_EQ(launchSendRecvItem(q, item, group, 0, 256, nullptr), tsrInvalidArgument);
}

// With CUDA built in but no usable device, availability is answered with a reason and loading
// the kernels fails with a sentence instead of crashing.
TEST(DeviceKernels, WithoutADeviceNothingLoads) {
  if (!TESSERA_HAVE_CUDA) GTEST_SKIP() << "this build has no CUDA";
  if (test::gpuUnavailableReason().empty()) GTEST_SKIP() << "a GPU is present";
  std::string why;
  EXPECT_FALSE(streamMemOpsAvailable(&why));
  EXPECT_FALSE(why.empty());
  clearLastError();
  EXPECT_NE(preloadDeviceKernels(), tsrSuccess);
  EXPECT_TRUE(lastErrorHas("kernel")) << lastErrorMessage();
}

}  // namespace
}  // namespace tessera::exec
