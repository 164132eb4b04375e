// Placeholder: the tree family is being written.
#include "collectives/algorithms/algorithms.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}

Result generateTree(const GenParams& /*params*/, Plan* /*out*/) {
  return TSR_FAIL(tsrInternalError, "algorithm family tree is not written yet");
}

}  // namespace tessera
