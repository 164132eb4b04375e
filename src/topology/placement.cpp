#include "topology/placement.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <mutex>

#include "core/env.hpp"
#include "core/hash.hpp"
#include "topology/pci_bus_id.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTopo;

std::string readBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return "";
  return id;
}

uint64_t processNonce() {
  // Regenerated when the pid changes, i.e. in a forked child, which must not pass for its parent.
  static std::mutex mu;
  static pid_t owner = -1;
  static uint64_t nonce = 0;
  std::lock_guard<std::mutex> lock(mu);
  pid_t pid = getpid();
  if (pid != owner || nonce == 0) {
    nonce = randomNonce64();
    owner = pid;
  }
  return nonce;
}

// Copies with truncation; always NUL-terminates.
void copyTruncated(char* dst, size_t cap, const std::string& src) {
  size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
  std::memcpy(dst, src.data(), n);
  std::memset(dst + n, 0, cap - n);
}

}  // namespace

Result hostId(std::string* out) {
  std::string id;
  TSR_CHECK(envString("TESSERA_HOST_ID", &id));
  if (!id.empty()) {
    *out = id;
    return tsrSuccess;
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) std::strcpy(name, "unknown-host");
  std::string boot = readBootId();
  if (boot.empty()) {
    // Without a boot id, containers sharing a host name look like one host; say so once.
    static std::once_flag warned;
    std::call_once(warned, [] {
      TSR_INFO("no /proc/sys/kernel/random/boot_id: the host id is the host name alone");
    });
    *out = name;
  } else {
    *out = std::string(name) + ":" + boot;
  }
  return tsrSuccess;
}

Result localPlacement(int cudaDevice, const char* busId, RankPlacement* out) {
  RankPlacement p;
  std::memset(&p, 0, sizeof(p));
  std::string host;
  TSR_CHECK(hostId(&host));
  p.hostHash = fnv1a64(host.data(), host.size());
  copyTruncated(p.hostId, sizeof(p.hostId), host);
  p.processNonce = processNonce();
  struct stat ns {};
  if (stat("/proc/self/ns/net", &ns) == 0) p.netNs = static_cast<uint64_t>(ns.st_ino);
  p.pid = static_cast<int32_t>(getpid());
  if (cudaDevice < -1)
    return TSR_FAIL(tsrInvalidArgument, "CUDA device %d is not a device index (-1 for none)",
                    cudaDevice);
  p.cudaDevice = cudaDevice;
  if (busId != nullptr && busId[0] != '\0') {
    PciBusId id;
    TSR_CHECK(parsePciBusId(busId, &id));
    copyTruncated(p.busId, sizeof(p.busId), formatPciBusId(id));
  }
  *out = p;
  return tsrSuccess;
}

const char* localityName(Locality l) {
  switch (l) {
    case Locality::kSameProcess: return "same process";
    case Locality::kSameHost: return "same host";
    case Locality::kOtherHost: return "other host";
  }
  return "?";
}

Locality locality(const RankPlacement& a, const RankPlacement& b) {
  // The arrays come from the wire: compare within their bounds only.
  if (a.hostHash != b.hostHash || std::strncmp(a.hostId, b.hostId, kHostIdBytes) != 0)
    return Locality::kOtherHost;
  if (a.processNonce == b.processNonce && a.pid == b.pid) return Locality::kSameProcess;
  return Locality::kSameHost;
}

bool sameNetNamespace(const RankPlacement& a, const RankPlacement& b) {
  return a.netNs == 0 || b.netNs == 0 || a.netNs == b.netNs;
}

bool sameGpu(const RankPlacement& a, const RankPlacement& b) {
  if (locality(a, b) == Locality::kOtherHost) return false;
  if (a.busId[0] == '\0' || b.busId[0] == '\0') return false;
  return std::strncmp(a.busId, b.busId, kPlacementBusIdBytes) == 0;
}

}  // namespace tessera
