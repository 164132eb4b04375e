// PCI bus ids as CUDA, NVML and hwloc spell them ("0000:3b:00.0", "00000000:3B:00.0",
// "3b:00.0"), reduced to numbers so that every spelling of one device compares equal.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace tessera {

struct PciBusId {
  uint32_t domain = 0;
  uint32_t bus = 0;       // 0..0xff
  uint32_t device = 0;    // 0..0x1f
  uint32_t function = 0;  // 0..7

  friend bool operator==(const PciBusId&, const PciBusId&) = default;
  friend auto operator<=>(const PciBusId&, const PciBusId&) = default;
};

// Accepts "[domain:]bus:device.function" in hexadecimal, any case, with surrounding blanks.
// tsrInvalidArgument with a sentence naming the text otherwise.
Result parsePciBusId(const char* text, PciBusId* out);
// The same without recording an error (for probing).
bool tryParsePciBusId(const char* text, PciBusId* out);

// Canonical lower-case form, "0000:3b:00.0".
std::string formatPciBusId(const PciBusId& id);

}  // namespace tessera
