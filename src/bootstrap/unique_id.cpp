#include "bootstrap/unique_id.hpp"

#include <bit>
#include <cstring>

#include "core/hash.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;
static_assert(std::endian::native == std::endian::little, "the wire formats assume little-endian");

constexpr size_t kOffMagic = 0;
constexpr size_t kOffFormat = 4;
constexpr size_t kOffFlags = 6;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffNonce = 16;
constexpr size_t kOffAddress = 24;
constexpr size_t kOffChecksum = TSR_UNIQUE_ID_BYTES - 8;
static_assert(kOffAddress + kWireAddressBytes <= kOffChecksum);
constexpr uint16_t kFlagRootAtRank0 = 1;

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
}  // namespace

void encodeUniqueId(const UniqueIdContents& c, tsrUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  store<uint32_t>(id->internal + kOffMagic, kUniqueIdMagic);
  store<uint16_t>(id->internal + kOffFormat, kUniqueIdFormat);
  store<uint16_t>(id->internal + kOffFlags, c.rootAtRank0 ? kFlagRootAtRank0 : 0);
  store<uint32_t>(id->internal + kOffVersion, c.version);
  store<uint64_t>(id->internal + kOffNonce, c.nonce);
  encodeAddress(c.root, reinterpret_cast<uint8_t*>(id->internal + kOffAddress));
  store<uint64_t>(id->internal + kOffChecksum, fnv1a64(id->internal, kOffChecksum));
}

Result decodeUniqueId(const tsrUniqueId& id, UniqueIdContents* c) {
  const char* p = id.internal;
  const char* kWhat =
      "the unique id is corrupted or not a tessera id (it must be the bytes tsrGetUniqueId wrote, "
      "passed unchanged to every rank)";
  if (load<uint32_t>(p + kOffMagic) != kUniqueIdMagic)
    return TSR_FAIL(tsrInvalidArgument, "%s: its magic number is 0x%08x instead of 0x%08x", kWhat,
                    load<uint32_t>(p + kOffMagic), kUniqueIdMagic);
  if (load<uint64_t>(p + kOffChecksum) != fnv1a64(p, kOffChecksum))
    return TSR_FAIL(tsrInvalidArgument, "%s: its checksum does not match its contents", kWhat);
  uint16_t format = load<uint16_t>(p + kOffFormat);
  if (format != kUniqueIdFormat)
    return TSR_FAIL(tsrInvalidArgument,
                    "the unique id has format %u but this tessera reads format %u (the ranks run "
                    "different tessera versions)",
                    format, kUniqueIdFormat);
  c->version = load<uint32_t>(p + kOffVersion);
  c->nonce = load<uint64_t>(p + kOffNonce);
  c->rootAtRank0 = (load<uint16_t>(p + kOffFlags) & kFlagRootAtRank0) != 0;
  if (!decodeAddress(reinterpret_cast<const uint8_t*>(p + kOffAddress), &c->root))
    return TSR_FAIL(tsrInvalidArgument, "%s: it holds no valid root address", kWhat);
  return tsrSuccess;
}

}  // namespace tessera
