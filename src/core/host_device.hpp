// Qualifiers for code shared by host and device. They are public (user kernels use the device
// handles), so the definition lives with the public device headers.
#pragma once

#include "tessera/device/host_device.hpp"
