// Which transports this build has.
#include "core/build_config.hpp"
#include "transport/transport.hpp"

namespace tessera {

bool transportBuilt(TransportKind kind, std::string* whyNot) {
  switch (kind) {
    case TransportKind::kInproc:
    case TransportKind::kShm: return true;
    case TransportKind::kUcx:
#if TESSERA_HAVE_UCX
      return true;
#else
      *whyNot = "UCX was not found (or was turned off) when tessera was built";
      return false;
#endif
    case TransportKind::kCudaIpc:
    case TransportKind::kP2p:
#if TESSERA_HAVE_CUDA
      return true;
#else
      *whyNot = "CUDA was not found (or was turned off) when tessera was built";
      return false;
#endif
  }
  *whyNot = "unknown transport";
  return false;
}

}  // namespace tessera
