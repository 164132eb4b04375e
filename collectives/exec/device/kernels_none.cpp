// kernels.hpp in a build without CUDA: nothing can be launched, and every launcher says so.
#include "collectives/exec/device/kernels.hpp"

namespace tessera::exec {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

Result notBuilt(const char* what) {
  return TSR_FAIL(tsrInvalidUsage,
                  "cannot %s: CUDA was not built in (tessera was configured without a CUDA "
                  "compiler), so the device executor has no kernels",
                  what);
}
}  // namespace

bool deviceKernelsBuilt() { return false; }

Result preloadDeviceKernels() { return notBuilt("load the device executor's kernels"); }

Result launchResident(const WorkQueueHandle&, uint64_t, uint32_t, uint32_t, void*) {
  return notBuilt("launch the device executor's resident kernel");
}

Result launchTrigger(const WorkQueueHandle&, const WorkItem&, bool, void*) {
  return notBuilt("launch the device executor's trigger kernel");
}

Result launchItem(const WorkQueueHandle&, const WorkItem&, uint32_t, uint32_t, void*) {
  return notBuilt("launch the device executor's item kernel");
}

Result launchSendRecvTrigger(const WorkQueueHandle&, const WorkItem&, P2PGroupDesc*,
                             const P2PGroupDesc&, bool, void*) {
  return notBuilt("launch the device executor's send/recv trigger kernel");
}

Result launchSendRecvItem(const WorkQueueHandle&, const WorkItem&, const P2PGroupDesc&, uint32_t,
                          uint32_t, void*) {
  return notBuilt("launch the device executor's send/recv item kernel");
}

Result residentKernelOccupancy(int, uint32_t, int*, int*) {
  return notBuilt("ask the resident kernel's occupancy");
}

Result deviceKernelInfo(std::vector<DeviceKernelInfo>* out) {
  out->clear();
  return tsrSuccess;
}

}  // namespace tessera::exec
