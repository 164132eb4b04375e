// decodeUniqueId: the 128 bytes a user passes to every rank (tsrCommInitRank). Garbage must be
// tsrInvalidArgument; what decodes must encode back to an id that decodes to the same contents.
// Most random ids fail the checksum, so each input is also tried with its checksum made right.
#include <cstdint>
#include <cstring>

#include "bootstrap/unique_id.hpp"
#include "core/hash.hpp"
#include "fuzz_common.hpp"

namespace tessera::fuzz {
namespace {

void check(const tsrUniqueId& id) {
  UniqueIdContents c;
  Result r = decodeUniqueId(id, &c);
  if (r != tsrSuccess) {
    if (r != tsrInvalidArgument)
      broken("decodeUniqueId failed with another code than InvalidArgument");
    return;
  }
  tsrUniqueId again;
  encodeUniqueId(c, &again);
  UniqueIdContents c2;
  if (decodeUniqueId(again, &c2) != tsrSuccess) broken("a decoded id does not re-encode");
  if (c2.version != c.version || c2.nonce != c.nonce || c2.rootAtRank0 != c.rootAtRank0 ||
      c2.root.str() != c.root.str())
    broken("an id re-encodes to other contents");
}

}  // namespace
}  // namespace tessera::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tsrUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::memcpy(id.internal, data, size < sizeof id.internal ? size : sizeof id.internal);
  tessera::fuzz::check(id);
  constexpr size_t kSum = sizeof id.internal - 8;  // unique_id.hpp: FNV-1a over bytes 0..119
  uint64_t sum = tessera::fnv1a64(id.internal, kSum);
  std::memcpy(id.internal + kSum, &sum, sizeof sum);
  tessera::fuzz::check(id);
  return 0;
}
