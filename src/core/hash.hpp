// Small identity helpers shared by the layers: a byte hash and random 64-bit nonces.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

// FNV-1a, 64 bits: host ids, communicator ids, the unique id's checksum. Not cryptographic.
inline uint64_t fnv1a64(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// A random 64-bit value from std::random_device, never 0.
uint64_t randomNonce64();

}  // namespace tessera
