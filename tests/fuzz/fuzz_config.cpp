// resolveConfig: the tsrConfig_t a user hands to tsrCommInitRankConfig / tsrCommSplit. The input
// is the struct's bytes, then a string. The struct is passed in a buffer of exactly the size its
// `size` field claims (a caller built against an older, shorter header), so ASan reports a read
// past it; netName (a pointer, which no input can make valid) is either null or the string.
// Whatever the fields hold, the answer is success or tsrInvalidArgument.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/config.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  tsrConfig_t c;
  std::memset(&c, 0, sizeof c);
  const size_t head = std::min(size, sizeof c);
  std::memcpy(&c, data, head);
  uintptr_t nameBits = 0;
  std::memcpy(&nameBits, &c.netName, sizeof nameBits);
  std::string name(reinterpret_cast<const char*>(data) + head, size - head);
  c.netName = (nameBits & 1) != 0 ? name.c_str() : nullptr;

  // Caller's buffer: `size` bytes (at least up to `magic`, which must be read to trust `size`).
  constexpr size_t kKnown = offsetof(tsrConfig_t, magic) + sizeof(unsigned);
  size_t bytes = c.size;
  if (bytes < kKnown) bytes = kKnown;
  if (bytes > 4 * sizeof c) bytes = sizeof c;  // refused from `size` alone; no field is read
  std::vector<uint8_t> buffer(bytes, 0);
  std::memcpy(buffer.data(), &c, std::min(bytes, sizeof c));
  const auto* user = reinterpret_cast<const tsrConfig_t*>(buffer.data());

  CommConfig out;
  Result r = resolveConfig(user, nullptr, &out);
  if (r != tsrSuccess && r != tsrInvalidArgument) fuzz::broken("resolveConfig: unexpected code");
  if (r == tsrSuccess) {
    if (out.minCTAs < 1 || out.maxCTAs > 64 || out.minCTAs > out.maxCTAs)
      fuzz::broken("resolveConfig accepted CTA counts out of range");
    if (out.timeoutSeconds < 0) fuzz::broken("resolveConfig accepted a negative timeout");
    // A split child inherits from its parent's resolved config.
    CommConfig child;
    Result r2 = resolveConfig(user, &out, &child);
    if (r2 != tsrSuccess) fuzz::broken("a config that resolved fails with an inherited parent");
  }
  return 0;
}
