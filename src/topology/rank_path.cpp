#include "topology/rank_path.hpp"

#include <mutex>
#include <string>

#include "core/env.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTopo;
}  // namespace

Result rankPathClass(const Topology& topo, const RankPlacement& a, const RankPlacement& b,
                     PathClass* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "rankPathClass: out is NULL");
  if (locality(a, b) == Locality::kOtherHost) {
    *out = PathClass::kNet;
    return tsrSuccess;
  }
  if (a.cudaDevice < 0 || b.cudaDevice < 0) {
    *out = PathClass::kSys;
    return tsrSuccess;
  }
  if (sameGpu(a, b)) {
    *out = PathClass::kLoc;
    return tsrSuccess;
  }
  for (const char* bus : {a.busId, b.busId}) {
    if (topo.gpuIndex(bus) < 0) {
      TSR_INFO("GPU %s is not in the topology (%s): taking SYS for its paths", bus,
               topo.source().c_str());
      *out = PathClass::kSys;
      return tsrSuccess;
    }
  }
  return topo.gpuPathClass(a.busId, b.busId, out);
}

Result processTopology(std::shared_ptr<const Topology>* out) {
  static std::mutex mutex;
  static std::shared_ptr<const Topology> cached;
  static std::string cachedFile;
  std::string file;
  TSR_CHECK(envString("TESSERA_TOPO_FILE", &file));
  std::lock_guard<std::mutex> lock(mutex);
  if (cached == nullptr || file != cachedFile) {
    std::unique_ptr<Topology> topo;
    TSR_CHECK(Topology::load(&topo));
    cached = std::move(topo);
    cachedFile = file;
  }
  *out = cached;
  return tsrSuccess;
}

}  // namespace tessera
