#include "topology/topology.hpp"

#include "core/build_config.hpp"
#include "core/env.hpp"
#include "topology/hwloc_discovery.hpp"
#include "topology/nvml_loader.hpp"
#include "topology/pci_bus_id.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTopo;
}  // namespace

Result Topology::load(std::unique_ptr<Topology>* out) {
  TopologyOptions options;
  TSR_CHECK(envString("TESSERA_TOPO_FILE", &options.xmlPath));
  bool nvmlDisabled = false;
  TSR_CHECK(envBool("TESSERA_NVML_DISABLE", &nvmlDisabled));
  options.useNvml = TESSERA_NVML_ENABLED && !nvmlDisabled && options.xmlPath.empty();
  Result r = load(options, out);
  if (r != tsrSuccess && !options.xmlPath.empty())
    return addContext(r, "TESSERA_TOPO_FILE=%s", options.xmlPath.c_str());
  // Say why NVML was not asked, so summary() does not blame a missing library.
  if (r == tsrSuccess && !TESSERA_NVML_ENABLED)
    (*out)->d_.nvlinkNote = "NVML left out of this build (TESSERA_WITH_NVML=OFF)";
  else if (r == tsrSuccess && nvmlDisabled)
    (*out)->d_.nvlinkNote = "NVML disabled by TESSERA_NVML_DISABLE";
  return r;
}

Result Topology::loadXml(const std::string& path, std::unique_ptr<Topology>* out) {
  TopologyOptions options;
  options.xmlPath = path;
  options.useNvml = false;
  return load(options, out);
}

Result Topology::load(const TopologyOptions& options, std::unique_ptr<Topology>* out) {
  TopologyData d;
  TSR_CHECK(discoverWithHwloc(options.xmlPath, &d));
  if (options.useNvml) {
    NvlinkEdges edges;
    std::string why;
    if (nvmlQueryNvlinks(options.nvmlLibrary, d.gpuIds, &edges, &why)) {
      d.nvlink = std::move(edges);
      d.nvlinkSource = NvlinkSource::kNvml;
    } else {
      d.nvlinkNote = "NVML unavailable: " + why;
      TSR_INFO("%s", d.nvlinkNote.c_str());
    }
  } else if (!options.xmlPath.empty()) {
    d.nvlinkNote = "NVML not asked: the topology comes from a file";
  } else {
    d.nvlinkNote = "NVML not asked";
  }
  TSR_INFO("topology of %s: %zu NUMA nodes, %d cores, %zu GPUs, %zu NICs", d.source.c_str(),
           d.numaNodes.size(), d.cores, d.gpus.size(), d.nics.size());
  *out = std::make_unique<Topology>(std::move(d));
  return tsrSuccess;
}

int Topology::gpuIndex(const std::string& busId) const {
  PciBusId id;
  if (!tryParsePciBusId(busId.c_str(), &id)) return -1;
  for (size_t i = 0; i < d_.gpuIds.size(); ++i)
    if (d_.gpuIds[i] == id) return static_cast<int>(i);
  return -1;
}

Result Topology::lookupGpu(const std::string& busId, int* index) const {
  PciBusId id;
  TSR_CHECK(parsePciBusId(busId.c_str(), &id));
  *index = gpuIndex(busId);
  if (*index < 0 && d_.hasPci)
    return TSR_FAIL(tsrInvalidArgument, "GPU %s is not in the topology of %s (%zu GPUs known)",
                    busId.c_str(), d_.source.c_str(), d_.gpus.size());
  return tsrSuccess;
}

Result Topology::gpuPciPathClass(const std::string& busA, const std::string& busB,
                                 PathClass* out) const {
  int a, b;
  TSR_CHECK(lookupGpu(busA, &a));
  TSR_CHECK(lookupGpu(busB, &b));
  if (a < 0 || b < 0) {
    // No PCI tree: all we can tell is whether it is the same device.
    PciBusId ia, ib;
    tryParsePciBusId(busA.c_str(), &ia);
    tryParsePciBusId(busB.c_str(), &ib);
    *out = ia == ib ? PathClass::kLoc : PathClass::kSys;
    return tsrSuccess;
  }
  size_t n = d_.gpus.size();
  *out = d_.gpuPci[static_cast<size_t>(a) * n + static_cast<size_t>(b)];
  return tsrSuccess;
}

Result Topology::gpuPathClass(const std::string& busA, const std::string& busB,
                              PathClass* out) const {
  PathClass pci;
  TSR_CHECK(gpuPciPathClass(busA, busB, &pci));
  int a = gpuIndex(busA), b = gpuIndex(busB);
  if (pci != PathClass::kLoc && a >= 0 && b >= 0 &&
      d_.nvlink.connected(d_.gpus.size(), static_cast<size_t>(a), static_cast<size_t>(b))) {
    *out = PathClass::kNvl;
    return tsrSuccess;
  }
  *out = pci;
  return tsrSuccess;
}

Result Topology::nearestNic(const std::string& gpuBusId, int* nicIndex, PathClass* path) const {
  int g;
  TSR_CHECK(lookupGpu(gpuBusId, &g));
  *nicIndex = -1;
  if (path != nullptr) *path = PathClass::kSys;
  if (g < 0) {
    if (!d_.nics.empty()) *nicIndex = 0;  // no PCI tree: any NIC is as far as any other
    return tsrSuccess;
  }
  int k = d_.nearestNic[static_cast<size_t>(g)];
  *nicIndex = k;
  if (k >= 0 && path != nullptr)
    *path = d_.gpuNic[static_cast<size_t>(g) * d_.nics.size() + static_cast<size_t>(k)];
  return tsrSuccess;
}

Result Topology::localCpus(const std::string& gpuBusId, std::vector<int>* out) const {
  int g;
  TSR_CHECK(lookupGpu(gpuBusId, &g));
  out->clear();
  if (g >= 0) *out = d_.gpus[static_cast<size_t>(g)].cpus;
  return tsrSuccess;
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += j > i ? strprintf("%d-%d", cpus[i], cpus[j]) : strprintf("%d", cpus[i]);
    i = j + 1;
  }
  return s;
}

}  // namespace tessera
