// Topology::summary(): what tessera_info prints about the machine.
#include <string>

#include "core/build_config.hpp"
#include "topology/topology.hpp"

namespace tessera {
namespace {

std::string gib(uint64_t bytes) {
  return strprintf("%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

void trimRight(std::string* s) {
  while (!s->empty() && s->back() == ' ') s->pop_back();
}

std::string numaText(int node) { return node >= 0 ? strprintf("%d", node) : std::string("?"); }

}  // namespace

std::string Topology::summary() const {
  const TopologyData& d = d_;
  std::string s = "topology of " + d.source;
#if TESSERA_HAVE_HWLOC
  s += " (hwloc " TESSERA_HWLOC_VERSION ")";
#endif
  s += "\n";

  s += strprintf("  NUMA nodes: %zu", d.numaNodes.size());
  for (size_t i = 0; i < d.numaNodes.size(); ++i)
    s += strprintf("%snode %d: %s", i == 0 ? " (" : ", ", d.numaNodes[i].osIndex,
                   gib(d.numaNodes[i].memoryBytes).c_str());
  s += d.numaNodes.empty() ? "\n" : ")\n";
  s += strprintf("  packages: %d, cores: %d, hardware threads: %d\n", d.packages, d.cores, d.pus);

  if (!d.hasPci) s += "  PCI: no information: " + d.pciNote + "\n";

  if (d.gpus.empty()) {
    s += "  GPUs: none\n";
  } else {
    s += strprintf("  GPUs: %zu\n", d.gpus.size());
    for (size_t i = 0; i < d.gpus.size(); ++i) {
      const GpuInfo& g = d.gpus[i];
      s += strprintf("    GPU%-2zu %s  NUMA %s  cpus %s%s%s\n", i, g.busId.c_str(),
                     numaText(g.numaNode).c_str(),
                     g.cpus.empty() ? "?" : formatCpuList(g.cpus).c_str(),
                     g.model.empty() ? "" : "  ", g.model.c_str());
    }
  }
  if (!d.nvswitches.empty())
    s += strprintf("  NVSwitches: %zu (%s)\n", d.nvswitches.size(),
                   joined(d.nvswitches, " ").c_str());

  if (d.nics.empty()) {
    s += "  NICs: none\n";
  } else {
    s += strprintf("  NICs: %zu\n", d.nics.size());
    for (size_t k = 0; k < d.nics.size(); ++k) {
      const NicInfo& n = d.nics[k];
      s += strprintf("    NIC%-2zu %s  %s  NUMA %s\n", k,
                     n.busId.empty() ? "(not PCI)" : n.busId.c_str(),
                     n.names.empty() ? "(no OS name)" : joined(n.names, ",").c_str(),
                     numaText(n.numaNode).c_str());
    }
  }

  switch (d.nvlinkSource) {
    case NvlinkSource::kNvml: s += "  NVLink: from NVML\n"; break;
    case NvlinkSource::kHwlocDistances:
      s += "  NVLink: from hwloc distances \"NVLinkBandwidth\" (" + d.nvlinkNote + ")\n";
      break;
    case NvlinkSource::kNone:
      s += "  NVLink: none known (" + d.nvlinkNote + "; no hwloc \"NVLinkBandwidth\" distances)\n";
      break;
  }

  // nvidia-smi topo -m style: GPU rows, GPU then NIC columns.
  size_t n = d.gpus.size(), m = d.nics.size();
  if (n > 0) {
    s += "  paths (X = self):\n        ";
    for (size_t j = 0; j < n; ++j) s += strprintf(" %-5s", strprintf("GPU%zu", j).c_str());
    for (size_t k = 0; k < m; ++k) s += strprintf(" %-5s", strprintf("NIC%zu", k).c_str());
    trimRight(&s);
    s += "\n";
    for (size_t i = 0; i < n; ++i) {
      s += strprintf("    %-5s", strprintf("GPU%zu", i).c_str());
      for (size_t j = 0; j < n; ++j) {
        PathClass c = d.gpuPci[i * n + j];
        if (c != PathClass::kLoc && d.nvlink.connected(n, i, j)) c = PathClass::kNvl;
        s += strprintf(" %-5s", c == PathClass::kLoc ? "X" : pathClassName(c));
      }
      for (size_t k = 0; k < m; ++k) s += strprintf(" %-5s", pathClassName(d.gpuNic[i * m + k]));
      trimRight(&s);
      s += "\n";
    }
  }
  return s;
}

}  // namespace tessera
