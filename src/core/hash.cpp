#include "core/hash.hpp"

#include <random>

namespace tessera {

uint64_t randomNonce64() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return v;
}

}  // namespace tessera
