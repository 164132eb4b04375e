// Placeholder: the pairwise family is being written.
#include "collectives/algorithms/algorithms.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}

Result generatePairwise(const GenParams& /*params*/, Plan* /*out*/) {
  return TSR_FAIL(tsrInternalError, "algorithm family pairwise is not written yet");
}

}  // namespace tessera
