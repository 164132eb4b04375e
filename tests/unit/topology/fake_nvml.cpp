// A stand-in for libnvidia-ml.so.1 so the NVML path of topology discovery runs on machines
// without a driver. It describes the GPUs of tests/data/topologies/nvlink-4gpu.xml with
// different links than that file's hwloc distances, so a test can tell which source was used:
//   GPU 03:00.0 <-> GPU 04:00.0 directly (two links), GPU 04:00.0 and GPU 13:00.0 each to the
//   NVSwitch 20:00.0, GPU 12:00.0 with no active link.
// FAKE_NVML_INIT_FAIL=1 makes nvmlInit_v2 fail as on a machine without a driver.
#include <cstdlib>
#include <cstring>

namespace {

struct Link {
  bool active;
  int remoteType;  // 0 GPU, 2 switch
  const char* remoteBusId;
};

struct FakeGpu {
  const char* busId;  // as NVML writes it
  Link links[4];
};

const FakeGpu kGpus[] = {
    {"00000000:03:00.0",
     {{true, 0, "00000000:04:00.0"},
      {true, 0, "00000000:04:00.0"},
      {false, 0, ""},
      {false, 0, ""}}},
    {"00000000:04:00.0",
     {{true, 0, "00000000:03:00.0"},
      {true, 0, "00000000:03:00.0"},
      {true, 2, "00000000:20:00.0"},
      {false, 0, ""}}},
    {"00000000:12:00.0", {{false, 0, ""}, {false, 0, ""}, {false, 0, ""}, {false, 0, ""}}},
    {"00000000:13:00.0",
     {{true, 2, "00000000:20:00.0"}, {false, 0, ""}, {false, 0, ""}, {false, 0, ""}}},
};

struct PciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

// "0000:3b:00.0" or "00000000:3B:00.0" -> bus number; -1 when unparseable.
long busNumber(const char* id) {
  const char* first = std::strchr(id, ':');
  if (first == nullptr) return -1;
  const char* second = std::strchr(first + 1, ':');
  const char* bus = second != nullptr ? first + 1 : id;
  return std::strtol(bus, nullptr, 16);
}

const FakeGpu* gpuOf(const void* handle) { return static_cast<const FakeGpu*>(handle); }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  const char* fail = std::getenv("FAKE_NVML_INIT_FAIL");
  return (fail != nullptr && std::strcmp(fail, "1") == 0) ? 9 : 0;  // 9: driver not loaded
}

__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }

__attribute__((visibility("default"))) const char* nvmlErrorString(int r) {
  return r == 9 ? "Driver Not Loaded" : "Unknown Error";
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* busId,
                                                                            void** device) {
  long bus = busNumber(busId);
  for (const FakeGpu& g : kGpus) {
    if (busNumber(g.busId) == bus) {
      *device = const_cast<FakeGpu*>(&g);
      return 0;
    }
  }
  return 6;  // not found
}

__attribute__((visibility("default"))) int nvmlDeviceGetNvLinkState(void* device, unsigned link,
                                                                    int* isActive) {
  if (link >= 4) return 2;  // invalid argument
  *isActive = gpuOf(device)->links[link].active ? 1 : 0;
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device,
                                                                               unsigned link,
                                                                               PciInfo* pci) {
  if (link >= 4 || !gpuOf(device)->links[link].active) return 2;
  std::memset(pci, 0, sizeof(*pci));
  std::strcpy(pci->busId, gpuOf(device)->links[link].remoteBusId);
  return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetNvLinkRemoteDeviceType(void* device,
                                                                               unsigned link,
                                                                               int* type) {
  if (link >= 4 || !gpuOf(device)->links[link].active) return 2;
  *type = gpuOf(device)->links[link].remoteType;
  return 0;
}

}  // extern "C"
