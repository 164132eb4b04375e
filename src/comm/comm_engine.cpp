// CommImpl's collective engine: made on first use over the transport context, the per-call
// overrides of the tuner, and zero-copy registrations (which may come before the engine exists,
// so that tsrCommRegister stays a local call).
#include <algorithm>

#include "collectives/exec/engine.hpp"
#include "comm/comm_impl.hpp"
#include "core/build_config.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// Handle value = (id << 4) | kTag: never null, and ids are process-wide, so a handle of another
// communicator is never mistaken for one of this communicator.
constexpr uintptr_t kRegistrationTag = 0xb;
constexpr uintptr_t kWindowTag = 0xc;  // windows' handles: the same ids, another tag
constexpr unsigned kRegistrationShift = 4;
std::atomic<uint64_t> nextRegistrationId{1};

void* taggedHandle(uint64_t id, uintptr_t tag) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>((id << kRegistrationShift) | tag));
}

// The id of a handle made with `tag`; 0 when it is not one.
uint64_t handleId(void* handle, uintptr_t tag) {
  auto v = reinterpret_cast<uintptr_t>(handle);
  if ((v & ((uintptr_t{1} << kRegistrationShift) - 1)) != tag) return 0;
  return static_cast<uint64_t>(v >> kRegistrationShift);
}

// Host index of each rank: ranks of one host share an index; indices are numbered in the order
// hosts first appear among the ranks, so every rank computes the same vector.
std::vector<int> hostIndices(const std::vector<RankPlacement>& placements) {
  std::vector<int> out(placements.size(), -1);
  int hosts = 0;
  for (size_t i = 0; i < placements.size(); ++i) {
    for (size_t j = 0; j < i && out[i] < 0; ++j)
      if (locality(placements[j], placements[i]) != Locality::kOtherHost) out[i] = out[j];
    if (out[i] < 0) out[i] = hosts++;
  }
  return out;
}

// Whether this rank's GPU (`device`) reaches the GPU of some same-host rank over PCIe only: the
// pair has no native peer atomics, which NVLink gives and PCIe peer access does not (the fused
// executor's test too). Peers on this GPU, or on a GPU this process cannot see, say nothing.
bool reachesAGpuOverPcieOnly(int device, const std::vector<RankPlacement>& placements, int rank) {
#if TESSERA_HAVE_CUDA
  const RankPlacement& mine = placements[static_cast<size_t>(rank)];
  for (size_t p = 0; p < placements.size(); ++p) {
    const RankPlacement& peer = placements[p];
    if (static_cast<int>(p) == rank || peer.busId[0] == '\0' || sameGpu(mine, peer) ||
        locality(mine, peer) == Locality::kOtherHost)
      continue;
    int d = -1, atomics = 0;
    if (cudaDeviceGetByPCIBusId(&d, peer.busId) != cudaSuccess) {
      (void)cudaGetLastError();  // not visible here: unknown
      continue;
    }
    if (d == device) continue;
    if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, device, d) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (atomics == 0) return true;
  }
#else
  (void)device;
  (void)placements;
  (void)rank;
#endif
  return false;
}

}  // namespace

Result CommImpl::collectives(CollectiveEngine** out) {
  TSR_CHECK(checkReady("collective setup"));
  std::lock_guard<std::mutex> lock(engineMutex_);
  if (!engine_) {
    TransportContext* ctx = nullptr;
    TSR_CHECK(transports(&ctx));
    EngineOptions o;
    o.transports = ctx;
    o.rank = rank();
    o.nranks = nranks();
    o.hostOf = hostIndices(placements_);
    for (int p = 0; p < nranks(); ++p)
      o.peerPids.push_back(
          localityOf(p) == Locality::kSameHost ? placements_[static_cast<size_t>(p)].pid : -1);
    o.timeoutSeconds = ctx->timeoutSeconds();  // TESSERA_TRANSPORT_TIMEOUT
    // The device executor runs on this rank's GPU (none on a host-only rank); its resident grid
    // follows the config (minCTAs / maxCTAs, which default to TESSERA_MIN_CTAS / _MAX_CTAS).
    o.cudaDevice = cudaDevice() >= 0 ? cudaDevice() : -1;
    o.minCtas = config_.minCTAs;
    o.maxCtas = config_.maxCTAs;
    const RankPlacement& mine = placements_[static_cast<size_t>(rank())];
    for (int p = 0; p < nranks(); ++p)
      if (localityOf(p) == Locality::kSameHost &&
          sameGpu(mine, placements_[static_cast<size_t>(p)]))
        ++o.gpuRanksElsewhere;
    // Between hosts the device tuner spreads a host's crossing rings over its NICs (rails): the
    // PCI network devices of this host's topology (hwloc), looked at only where there are
    // several hosts and this rank has a GPU. Unknown (no hwloc, no PCI view): one.
    const bool severalHosts =
        std::any_of(o.hostOf.begin(), o.hostOf.end(), [](int h) { return h != 0; });
    if (severalHosts && o.cudaDevice >= 0) {
      std::shared_ptr<const Topology> topo;
      if (processTopology(&topo) == tsrSuccess) {
        for (const NicInfo& nic : topo->nics())
          if (!nic.busId.empty()) ++o.nicsPerHost;
      } else {
        TSR_INFO("rank %d: no topology for counting NICs (%s): the tuner takes one per host",
                 rank(), lastErrorMessage());
      }
    }
    // The tuner's device model prices the links within a host as PCIe where a GPU pair has no
    // NVLink.
    if (o.cudaDevice >= 0)
      o.devicePcie = reachesAGpuOverPcieOnly(o.cudaDevice, placements_, rank());
    std::unique_ptr<CollectiveEngine> engine;
    TSR_CHECK(CollectiveEngine::create(o, &engine));
    for (auto& [id, reg] : registrations_) {
      // Checked when registered; a refusal now only costs the zero-copy path for that buffer.
      Result r = reg.onDevice ? engine->registerDeviceBuffer(reg.ptr, reg.bytes, &reg.engineHandle)
                              : engine->registerBuffer(reg.ptr, reg.bytes, &reg.engineHandle);
      if (r != tsrSuccess) {
        TSR_WARN("buffer %p (%zu bytes) registered before the first collective: %s", reg.ptr,
                 reg.bytes, lastErrorMessage());
        reg.engineHandle = nullptr;
      }
    }
    callTimeout_.store(o.timeoutSeconds);
    engine_ = std::move(engine);
    enginePublished_.store(engine_.get(), std::memory_order_release);
    TSR_INFO("comm %016llx rank %d: collective engine ready (%d hosts, timeout %.1f s)",
             static_cast<unsigned long long>(commHash_), rank(),
             o.hostOf.empty() ? 0 : *std::max_element(o.hostOf.begin(), o.hostOf.end()) + 1,
             o.timeoutSeconds);
  }
  *out = engine_.get();
  return tsrSuccess;
}

void CommImpl::setCallOverride(std::string algorithm, std::shared_ptr<const Plan> plan) {
  std::lock_guard<std::mutex> lock(overrideMutex_);
  overrideAlgorithm_ = std::move(algorithm);
  overridePlan_ = std::move(plan);
}

void CommImpl::callOverride(std::string* algorithm, std::shared_ptr<const Plan>* plan) const {
  std::lock_guard<std::mutex> lock(overrideMutex_);
  *algorithm = overrideAlgorithm_;
  *plan = overridePlan_;
}

Result CommImpl::registerBuffer(void* ptr, size_t bytes, bool onDevice, void** handle) {
  TSR_CHECK(checkReady("tsrCommRegister"));
  std::lock_guard<std::mutex> lock(engineMutex_);
  Registration reg{ptr, bytes, nullptr, onDevice};
  if (onDevice)
    TSR_INFO(
        "tsrCommRegister: %p (%zu bytes) is device memory: calls on it are zero-copy where "
        "every rank is in this process, staged elsewhere (tsrCommWindowRegister maps windows "
        "across processes)",
        ptr, bytes);
  if (engine_)
    TSR_CHECK(onDevice ? engine_->registerDeviceBuffer(ptr, bytes, &reg.engineHandle)
                       : engine_->registerBuffer(ptr, bytes, &reg.engineHandle));
  uint64_t id = nextRegistrationId.fetch_add(1);
  registrations_.emplace(id, reg);
  *handle = taggedHandle(id, kRegistrationTag);
  return tsrSuccess;
}

Result CommImpl::deregisterBuffer(void* handle) {
  TSR_CHECK(checkReady("tsrCommDeregister"));
  std::lock_guard<std::mutex> lock(engineMutex_);
  auto it = registrations_.find(handleId(handle, kRegistrationTag));
  if (it == registrations_.end())
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrCommDeregister: handle %p was not made by tsrCommRegister on this "
                    "communicator, or was already deregistered",
                    handle);
  const Registration& reg = it->second;
  if (engine_ && reg.engineHandle != nullptr)  // refused (a call in flight): it stays
    TSR_CHECK(reg.onDevice ? engine_->deregisterDeviceBuffer(reg.engineHandle)
                           : engine_->deregisterBuffer(reg.engineHandle));
  registrations_.erase(it);
  return tsrSuccess;
}

Result CommImpl::registerWindow(void* ptr, size_t bytes, bool onDevice, void** handle) {
  TSR_CHECK(checkReady("tsrCommWindowRegister"));
  Window win;
  if (onDevice) {
    CollectiveEngine* engine = nullptr;
    TSR_CHECK(collectives(&engine));  // collective the first time, as a collective's first call
    std::lock_guard<std::mutex> lock(engineMutex_);
    TSR_CHECK(engine->registerWindow(ptr, bytes, &win.engineHandle));
  } else {
    void* reg = nullptr;
    TSR_CHECK(registerBuffer(ptr, bytes, false, &reg));
    win.registration = handleId(reg, kRegistrationTag);
  }
  std::lock_guard<std::mutex> lock(engineMutex_);
  uint64_t id = nextRegistrationId.fetch_add(1);
  windows_.emplace(id, win);
  *handle = taggedHandle(id, kWindowTag);
  return tsrSuccess;
}

Result CommImpl::deregisterWindow(void* handle) {
  TSR_CHECK(checkReady("tsrCommWindowDeregister"));
  Window win;
  uint64_t id = handleId(handle, kWindowTag);
  {
    std::lock_guard<std::mutex> lock(engineMutex_);
    auto it = windows_.find(id);
    if (it == windows_.end())
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrCommWindowDeregister: %p was not made by tsrCommWindowRegister on this "
                      "communicator, or was already deregistered",
                      handle);
    win = it->second;
  }
  if (win.engineHandle != nullptr) {
    std::lock_guard<std::mutex> lock(engineMutex_);
    TSR_CHECK(engine_->deregisterWindow(win.engineHandle));  // refused: the window stays
  } else {
    TSR_CHECK(deregisterBuffer(taggedHandle(win.registration, kRegistrationTag)));
  }
  std::lock_guard<std::mutex> lock(engineMutex_);
  windows_.erase(id);
  return tsrSuccess;
}

}  // namespace tessera
