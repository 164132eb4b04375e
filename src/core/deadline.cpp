#include "core/deadline.hpp"

#include "tessera/device/atomics.hpp"

namespace tessera {

void Backoff::pause() { device::backoff(iter_++); }

}  // namespace tessera
