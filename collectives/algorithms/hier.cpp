// Placeholder: the hier family is being written.
#include "collectives/algorithms/algorithms.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}

Result generateHier(const GenParams& /*params*/, Plan* /*out*/) {
  return TSR_FAIL(tsrInternalError, "algorithm family hier is not written yet");
}

}  // namespace tessera
