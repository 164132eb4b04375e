#include "transport/memory.hpp"

#include <cstring>

#include "transport/context_state.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

constexpr char kMagic[4] = {'T', 'S', 'R', 'M'};
constexpr uint16_t kBlobVersion = 1;

// The blob's fixed header, written field by field in host byte order (peers of one context run
// the same build; the magic and version catch anything else).
struct WireHeader {
  char magic[4];
  uint16_t version;
  uint8_t kind;
  uint8_t sections;
  int32_t ownerRank;
  uint32_t memoryId;
  uint64_t contextId;
  uint64_t size;
  uint64_t address;
  int32_t cudaDevice;
  uint32_t reserved;
};
struct WireSection {
  uint8_t transport;
  uint8_t exported;  // 0: the bytes are the reason it could not be exported
  uint16_t reserved;
  uint32_t bytes;
};
constexpr size_t kMaxBlobBytes = 1 << 20;

}  // namespace

Memory::~Memory() {
  // Transports let go of the region (deregistration, withdrawn descriptors) before it is freed.
  for (auto& e : exports_) e.reset();
  if (release_) release_();
}

int Memory::rank() const { return context_->rank; }

Result Memory::serialize(std::string* blob) const {
  WireHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kBlobVersion;
  h.kind = static_cast<uint8_t>(kind_);
  h.ownerRank = context_->rank;
  h.memoryId = id_;
  h.contextId = context_->contextId;
  h.size = size_;
  h.address = reinterpret_cast<uintptr_t>(ptr_);
  h.cudaDevice = device_;
  std::string out;
  std::lock_guard<std::mutex> lock(context_->memoryMutex);
  for (const auto& e : exports_)
    if (e) ++h.sections;
  out.append(reinterpret_cast<const char*>(&h), sizeof h);
  for (size_t k = 0; k < exports_.size(); ++k) {
    if (!exports_[k]) continue;
    const std::string& body =
        exports_[k]->section.empty() ? exports_[k]->whyNot : exports_[k]->section;
    WireSection s{};
    s.transport = static_cast<uint8_t>(k);
    s.exported = exports_[k]->section.empty() ? 0 : 1;
    s.bytes = static_cast<uint32_t>(body.size());
    out.append(reinterpret_cast<const char*>(&s), sizeof s);
    out.append(body);
  }
  *blob = std::move(out);
  return tsrSuccess;
}

std::shared_ptr<Memory> findRegisteredMemory(ContextState& context, const void* ptr, size_t bytes) {
  auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(context.memoryMutex);
  for (const auto& weak : context.memories) {
    auto m = weak.lock();
    if (!m) continue;
    auto base = reinterpret_cast<uintptr_t>(m->data());
    if (p >= base && p - base <= m->size() && bytes <= m->size() - (p - base)) return m;
  }
  return nullptr;
}

Result parseMemoryBlob(const std::string& blob, TransportKind transport, MemoryBlobHeader* header,
                       std::string* section, std::string* whyNot) {
  section->clear();
  whyNot->clear();
  WireHeader h{};
  if (blob.size() < sizeof h || blob.size() > kMaxBlobBytes)
    return TSR_FAIL(tsrInvalidArgument,
                    "memory blob of %zu bytes is not a tessera memory blob (expected %zu to %zu "
                    "bytes)",
                    blob.size(), sizeof h, kMaxBlobBytes);
  std::memcpy(&h, blob.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kBlobVersion)
    return TSR_FAIL(tsrInvalidArgument,
                    "memory blob has a wrong magic or version %u (expected TSRM version %u)",
                    h.version, kBlobVersion);
  if (h.kind > static_cast<uint8_t>(MemoryKind::kCudaPinnedHost))
    return TSR_FAIL(tsrInvalidArgument, "memory blob names an unknown memory kind %u", h.kind);
  header->contextId = h.contextId;
  header->ownerRank = h.ownerRank;
  header->memoryId = h.memoryId;
  header->size = h.size;
  header->address = h.address;
  header->kind = static_cast<MemoryKind>(h.kind);
  header->cudaDevice = h.cudaDevice;
  size_t at = sizeof h;
  bool seen = false;
  for (unsigned i = 0; i < h.sections; ++i) {
    WireSection s{};
    if (blob.size() - at < sizeof s)
      return TSR_FAIL(tsrInvalidArgument, "memory blob is cut short in section %u of %u", i,
                      h.sections);
    std::memcpy(&s, blob.data() + at, sizeof s);
    at += sizeof s;
    if (blob.size() - at < s.bytes)
      return TSR_FAIL(tsrInvalidArgument, "memory blob section %u claims %u bytes but %zu are left",
                      i, s.bytes, blob.size() - at);
    if (s.transport == static_cast<uint8_t>(transport)) {
      seen = true;
      (s.exported ? *section : *whyNot) = blob.substr(at, s.bytes);
    }
    at += s.bytes;
  }
  if (at != blob.size())
    return TSR_FAIL(tsrInvalidArgument, "memory blob has %zu trailing bytes", blob.size() - at);
  if (!seen) *whyNot = "its owner has no such transport";
  return tsrSuccess;
}

}  // namespace tessera
