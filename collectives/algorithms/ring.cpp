// Placeholder: the ring family is being written.
#include "collectives/algorithms/algorithms.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}

Result generateRing(const GenParams& /*params*/, Plan* /*out*/) {
  return TSR_FAIL(tsrInternalError, "algorithm family ring is not written yet");
}

}  // namespace tessera
