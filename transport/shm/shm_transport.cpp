// PLACEHOLDER until the shm transport lands: fails saying so.
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;
}
Result makeShmTransport(std::shared_ptr<ContextState>, std::unique_ptr<Transport>*) {
  return TSR_FAIL(tsrInvalidUsage, "shm transport: not implemented yet");
}
}  // namespace tessera
