// ABI assumptions (there is no nvml.h on the build machine, so the few declarations are ours):
// - Every NVML entry point is a plain C function returning nvmlReturn_t, a C enum (int), with
//   NVML_SUCCESS == 0. Device handles are opaque pointers.
// - nvmlEnableState_t and nvmlIntNvLinkDeviceType_t are C enums (int): enabled == 1; remote
//   device type GPU == 0, IBM NPU == 1, SWITCH == 2, unknown == 0xFF.
// - nvmlPciInfo_t is the layout the *_v2/_v3 entry points have used since NVML 8:
//   char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
//   char busId[32]. We call only the versioned symbols that take that layout
//   (nvmlDeviceGetNvLinkRemotePciInfo_v2), never the unversioned legacy ones.
// - A GPU has at most kMaxLinks NVLinks (NVML_NVLINK_MAX_LINKS is 18 up to CUDA 12); a link
//   index the GPU does not have answers an error, which we skip.
// The library is never dlclosed: NVML registers handlers that must outlive our use, and
// dlopen of the same name again only bumps a reference count.
#include "topology/nvml_loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

#include "core/status.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTopo;

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;
constexpr int kNvlinkDeviceGpu = 0;
constexpr int kNvlinkDeviceIbmNpu = 1;
constexpr int kNvlinkDeviceSwitch = 2;
constexpr unsigned kMaxLinks = 18;

struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

struct NvmlApi {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*errorString)(nvmlReturn_t);
  nvmlReturn_t (*handleByBusId)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*);
  nvmlReturn_t (*remotePciInfo)(nvmlDevice_t, unsigned, NvmlPciInfo*);
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*);  // optional (NVML >= 11)
};

template <typename F>
bool loadSymbol(void* lib, const char* name, F* fn, std::string* why) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) {
    *why = strprintf("NVML has no %s", name);
    return false;
  }
  return true;
}

bool loadApi(const std::string& library, NvmlApi* api, std::string* why) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    *why = err != nullptr ? err : ("cannot load " + library);
    return false;
  }
  if (!loadSymbol(lib, "nvmlInit_v2", &api->init, why) ||
      !loadSymbol(lib, "nvmlShutdown", &api->shutdown, why) ||
      !loadSymbol(lib, "nvmlErrorString", &api->errorString, why) ||
      !loadSymbol(lib, "nvmlDeviceGetHandleByPciBusId_v2", &api->handleByBusId, why) ||
      !loadSymbol(lib, "nvmlDeviceGetNvLinkState", &api->linkState, why) ||
      !loadSymbol(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &api->remotePciInfo, why))
    return false;
  api->remoteType = reinterpret_cast<decltype(api->remoteType)>(
      dlsym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType"));
  return true;
}

// NVML's own state is global; one query at a time keeps init/shutdown pairs simple.
std::mutex gNvmlMutex;

}  // namespace

bool nvmlQueryNvlinks(const std::string& library, const std::vector<PciBusId>& gpus,
                      NvlinkEdges* out, std::string* why) {
  std::lock_guard<std::mutex> lock(gNvmlMutex);
  NvmlApi api{};
  if (!loadApi(library, &api, why)) return false;
  nvmlReturn_t r = api.init();
  if (r != kNvmlSuccess) {
    const char* s = api.errorString(r);
    *why = strprintf("nvmlInit_v2 failed: %s", s != nullptr ? s : "unknown error");
    return false;
  }
  size_t n = gpus.size();
  NvlinkEdges e;
  e.gpuGpu.assign(n * n, 0);
  e.toSwitch.assign(n, 0);
  int links = 0;
  for (size_t i = 0; i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    std::string bus = formatPciBusId(gpus[i]);
    if (api.handleByBusId(bus.c_str(), &dev) != kNvmlSuccess || dev == nullptr) {
      TSR_INFO("NVML does not know GPU %s; assuming it has no NVLink", bus.c_str());
      continue;
    }
    for (unsigned link = 0; link < kMaxLinks; ++link) {
      int active = 0;
      if (api.linkState(dev, link, &active) != kNvmlSuccess || active != kNvmlFeatureEnabled)
        continue;
      ++links;
      int type = -1;
      if (api.remoteType != nullptr && api.remoteType(dev, link, &type) != kNvmlSuccess) type = -1;
      if (type == kNvlinkDeviceSwitch) {
        e.toSwitch[i] = 1;
        continue;
      }
      if (type == kNvlinkDeviceIbmNpu) continue;  // a link to a POWER CPU, not to a peer GPU
      NvmlPciInfo pci{};
      if (api.remotePciInfo(dev, link, &pci) != kNvmlSuccess) continue;
      pci.busId[sizeof(pci.busId) - 1] = '\0';
      PciBusId remote;
      size_t j = n;
      if (tryParsePciBusId(pci.busId, &remote))
        j = static_cast<size_t>(std::find(gpus.begin(), gpus.end(), remote) - gpus.begin());
      if (j < n) {
        e.gpuGpu[i * n + j] = e.gpuGpu[j * n + i] = 1;
      } else if (type != kNvlinkDeviceGpu) {
        // Old drivers cannot say what is at the far end; a non-GPU peer is an NVSwitch.
        e.toSwitch[i] = 1;
      }
    }
  }
  api.shutdown();
  TSR_INFO("NVML: %d active NVLinks on %zu GPUs", links, n);
  *out = std::move(e);
  return true;
}

}  // namespace tessera
