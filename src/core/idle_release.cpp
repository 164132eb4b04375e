// The registry of resident grids and held-back releases (idle_release.hpp).
#include "core/idle_release.hpp"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/log.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kAlloc;

struct DeviceState {
  int grids = 0;
  int ctas = 0;
  int releasing = 0;  // threads running releases of this device now
  std::vector<std::function<void()>> held;
};

struct Registry {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int, DeviceState> devices;
};

Registry& registry() {
  // Never destroyed: releases may be held until a grid ends during static destruction.
  static Registry* r = new Registry;
  return *r;
}

// Runs `releases` outside the lock, as one "releasing" episode of `device`.
void runReleases(Registry& r, int device, std::vector<std::function<void()>> releases) {
  for (auto& f : releases) f();
  releases.clear();  // whatever the releases captured goes now, still inside the episode
  std::lock_guard<std::mutex> lock(r.mutex);
  --r.devices[device].releasing;
  r.changed.notify_all();
}

}  // namespace

void residentGridStarting(int device, int ctas) {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mutex);
  DeviceState& d = r.devices[device];
  // A free in progress would wait for this grid, which ends only when its owner stops it: let the
  // frees finish first. They wait for nothing of ours, so this is short; the bound only guards
  // against a driver that blocks for another reason.
  if (!r.changed.wait_for(lock, std::chrono::seconds(60), [&d] { return d.releasing == 0; }))
    TSR_WARN(
        "device %d: releases of device memory still running after 60 s; starting a resident "
        "grid anyway",
        device);
  ++d.grids;
  d.ctas += ctas;
}

void residentGridEnded(int device, int ctas) {
  Registry& r = registry();
  std::vector<std::function<void()>> run;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    DeviceState& d = r.devices[device];
    if (d.grids <= 0) {
      TSR_WARN("device %d: a resident grid ended that was never counted", device);
      return;
    }
    --d.grids;
    d.ctas -= ctas;
    r.changed.notify_all();
    if (d.grids > 0 || d.held.empty()) return;
    run.swap(d.held);
    ++d.releasing;
  }
  TSR_TRACE("device %d: the last resident grid ended; running %zu held releases", device,
            run.size());
  runReleases(r, device, std::move(run));
}

int residentGridCtas(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.devices.find(device);
  return it == r.devices.end() ? 0 : it->second.ctas;
}

void releaseWhenIdle(int device, std::function<void()> release) {
  if (!release) return;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    DeviceState& d = r.devices[device];
    if (d.grids > 0) {
      d.held.push_back(std::move(release));
      TSR_TRACE("device %d: a release held back until %d resident grid(s) end (%zu held)", device,
                d.grids, d.held.size());
      return;
    }
    ++d.releasing;
  }
  std::vector<std::function<void()>> one;
  one.push_back(std::move(release));
  runReleases(r, device, std::move(one));
}

size_t heldReleases(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.devices.find(device);
  return it == r.devices.end() ? 0 : it->second.held.size();
}

bool waitIdleLikeCudaFree(int device, double seconds) {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mutex);
  DeviceState& d = r.devices[device];
  return r.changed.wait_for(lock, std::chrono::duration<double>(seconds),
                            [&d] { return d.grids == 0; });
}

}  // namespace tessera
