// Everything a user kernel may use to talk to peers: include this one header.
#pragma once

#include "tessera/device/atomics.hpp"
#include "tessera/device/fifo_device.hpp"
#include "tessera/device/memory_channel_device.hpp"
#include "tessera/device/port_channel_device.hpp"
#include "tessera/device/semaphore_device.hpp"
