// The ucx transport in a build without UCX: its factory says why it is missing.
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;
}

Result makeUcxTransport(std::shared_ptr<ContextState>, std::unique_ptr<Transport>*) {
  std::string why;
  transportBuilt(TransportKind::kUcx, &why);
  return TSR_FAIL(tsrInvalidUsage, "ucx transport unavailable: %s", why.c_str());
}

}  // namespace tessera
