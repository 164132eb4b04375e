// PLACEHOLDER (being written): EngineImpl's device-executor entry points.
#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/engine_impl.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}  // namespace

Result EngineImpl::enqueue(const CollCall&, void*) {
  return TSR_FAIL(tsrInvalidUsage, "rank %d: the device executor is not built yet", rank_);
}
Result EngineImpl::deviceSynchronize() { return tsrSuccess; }
Result EngineImpl::deviceError() { return tsrSuccess; }
void EngineImpl::abortDevice() {}

}  // namespace tessera
