// The plain description of one machine that discovery (hwloc, NVML) produces and Topology
// answers questions from. Everything is computed at load time, so a loaded Topology is
// immutable and safe to share between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/path_class.hpp"
#include "topology/pci_bus_id.hpp"

namespace tessera {

struct NumaNodeInfo {
  int osIndex = -1;
  uint64_t memoryBytes = 0;
};

struct GpuInfo {
  std::string busId;      // canonical "0000:3b:00.0"
  int numaNode = -1;      // OS index of its NUMA node; -1 when not exactly one
  std::vector<int> cpus;  // OS indices of the PUs near it
  std::string model;      // e.g. "Tesla V100-SXM3-32GB-H"; "" when hwloc does not say
};

struct NicInfo {
  std::string busId;               // "" for a network device hwloc found outside PCI
  std::vector<std::string> names;  // OS devices: verbs names first ("mlx5_0"), then "ib0", ...
  int numaNode = -1;
  std::vector<int> cpus;
};

enum class NvlinkSource { kNone, kHwlocDistances, kNvml };

// NVLinks as discovery sees them. All NVSwitches are treated as one fabric (as NCCL does): two
// GPUs that both reach an NVSwitch are NVLink-connected, because the switches of one system
// are trunked together (the DGX-2's two baseboards are).
struct NvlinkEdges {
  std::vector<uint8_t> gpuGpu;    // n*n, symmetric: a direct link
  std::vector<uint8_t> toSwitch;  // n: at least one link to an NVSwitch
  bool connected(size_t n, size_t a, size_t b) const {
    if (gpuGpu.size() != n * n || toSwitch.size() != n) return false;
    return gpuGpu[a * n + b] != 0 || (toSwitch[a] != 0 && toSwitch[b] != 0);
  }
};

struct TopologyData {
  std::string source;  // "this machine" or the XML file
  bool hasPci = false;
  std::string pciNote;  // why there is no PCI information (when !hasPci)
  std::vector<NumaNodeInfo> numaNodes;
  int packages = 0;
  int cores = 0;
  int pus = 0;
  std::vector<GpuInfo> gpus;  // sorted by bus id
  std::vector<PciBusId> gpuIds;
  std::vector<NicInfo> nics;
  std::vector<std::string> nvswitches;  // bus ids
  std::vector<PathClass> gpuPci;        // gpus x gpus, PCI tree only
  std::vector<PathClass> gpuNic;        // gpus x nics
  std::vector<int> nearestNic;          // per GPU, -1 when there is no NIC
  NvlinkEdges nvlink;
  NvlinkSource nvlinkSource = NvlinkSource::kNone;
  std::string nvlinkNote;  // why NVML was not used, or what it found
};

}  // namespace tessera
