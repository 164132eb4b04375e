#include "comm/handles.hpp"

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kComm;

// Handle value = (id << 4) | kTag: never 0, never a plausible heap pointer of a live object.
constexpr uintptr_t kTag = 0x7;
constexpr unsigned kShift = 4;

struct Table {
  std::mutex mutex;
  uint64_t nextId = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Communicator>> live;
};

// Leaked on purpose: handles may be used from threads still running at process exit.
Table& table() {
  static Table* t = new Table();
  return *t;
}

Result decode(tsrComm_t h, const char* api, uint64_t* id) {
  auto v = reinterpret_cast<uintptr_t>(h);
  if (h == nullptr) return TSR_FAIL(tsrInvalidArgument, "%s: the communicator is NULL", api);
  if ((v & ((1u << kShift) - 1)) != kTag)
    return TSR_FAIL(tsrInvalidUsage, "%s: %p is not a communicator handle made by tessera", api,
                    static_cast<void*>(h));
  *id = static_cast<uint64_t>(v >> kShift);
  return tsrSuccess;
}

}  // namespace

tsrComm_t handleRegister(std::unique_ptr<Communicator> comm) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  uint64_t id = t.nextId++;
  t.live.emplace(id, std::shared_ptr<Communicator>(std::move(comm)));
  return reinterpret_cast<tsrComm_t>(static_cast<uintptr_t>((id << kShift) | kTag));
}

namespace {
// The communicator behind `h`; with `take`, also removes it from the table.
Result find(tsrComm_t h, const char* api, bool take, std::shared_ptr<Communicator>* out) {
  uint64_t id = 0;
  TSR_CHECK(decode(h, api, &id));
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.live.find(id);
  if (it == t.live.end())
    return TSR_FAIL(tsrInvalidUsage, "%s: communicator %p was %sdestroyed (or never created)", api,
                    static_cast<void*>(h), take ? "already " : "");
  if (!take) {
    *out = it->second;
    return tsrSuccess;
  }
  *out = std::move(it->second);
  t.live.erase(it);
  return tsrSuccess;
}
}  // namespace

Result handleLookup(tsrComm_t h, const char* api, std::shared_ptr<Communicator>* out) {
  return find(h, api, /*take=*/false, out);
}

Result handleRemove(tsrComm_t h, const char* api, std::shared_ptr<Communicator>* out) {
  return find(h, api, /*take=*/true, out);
}

}  // namespace tessera
