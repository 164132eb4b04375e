// Placeholder: the rhd family is being written.
#include "collectives/algorithms/algorithms.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}

Result generateRhd(const GenParams& /*params*/, Plan* /*out*/) {
  return TSR_FAIL(tsrInternalError, "algorithm family rhd is not written yet");
}

}  // namespace tessera
