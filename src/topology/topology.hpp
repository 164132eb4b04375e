// What this machine looks like, for choosing transports and placing work: NUMA nodes, cores,
// GPUs and NICs by PCI bus id, NVLinks, and the path class between two GPUs (NCCL's LOC / NVL /
// PIX / PXB / PHB / SYS). Host and process identity live in placement.hpp.
//
// Sources: hwloc (the live machine or an XML file, TESSERA_TOPO_FILE) and, on the live machine,
// NVML loaded with dlopen for NVLinks (TESSERA_NVML_DISABLE turns it off). Without hwloc in the
// build, or where hwloc sees no PCI bus, the topology has no PCI information: it says why, and
// classes every pair of distinct GPUs as SYS.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "topology/path_class.hpp"
#include "topology/topology_data.hpp"

namespace tessera {

struct TopologyOptions {
  std::string xmlPath;  // hwloc XML file; "" = discover the live machine
  bool useNvml = true;  // ask NVML for NVLinks (ignored when it cannot be loaded)
  std::string nvmlLibrary = "libnvidia-ml.so.1";
};

class Topology {
 public:
  // The live machine, or the file named by TESSERA_TOPO_FILE; NVML unless TESSERA_NVML_DISABLE
  // or a file is used (a file describes another machine than the one NVML would describe).
  static Result load(std::unique_ptr<Topology>* out);
  // An hwloc XML file, without NVML. A missing, unreadable or malformed file is
  // tsrInvalidArgument naming the file; a build without hwloc answers tsrInvalidUsage.
  static Result loadXml(const std::string& path, std::unique_ptr<Topology>* out);
  static Result load(const TopologyOptions& options, std::unique_ptr<Topology>* out);

  const std::string& source() const { return d_.source; }
  bool hasPciInfo() const { return d_.hasPci; }
  const std::string& pciUnavailableReason() const { return d_.pciNote; }

  const std::vector<NumaNodeInfo>& numaNodes() const { return d_.numaNodes; }
  int packageCount() const { return d_.packages; }
  int coreCount() const { return d_.cores; }
  int puCount() const { return d_.pus; }

  const std::vector<GpuInfo>& gpus() const { return d_.gpus; }  // sorted by bus id
  const std::vector<NicInfo>& nics() const { return d_.nics; }
  const std::vector<std::string>& nvswitches() const { return d_.nvswitches; }
  NvlinkSource nvlinkSource() const { return d_.nvlinkSource; }

  // Index into gpus() of a bus id in any spelling ("0000:3B:00.0", "3b:00.0"); -1 if absent.
  int gpuIndex(const std::string& busId) const;

  // Path between two GPUs, NVLink first. A bus id this topology does not know is
  // tsrInvalidArgument naming it; without PCI information distinct GPUs are SYS.
  Result gpuPathClass(const std::string& busA, const std::string& busB, PathClass* out) const;
  // The same through the PCI tree only, ignoring NVLink (what P2P over PCIe would traverse).
  Result gpuPciPathClass(const std::string& busA, const std::string& busB, PathClass* out) const;

  // The NIC closest to a GPU (fewest bridges, then deepest common ancestor), as an index into
  // nics() and its path class; *nicIndex = -1 when there is no NIC.
  Result nearestNic(const std::string& gpuBusId, int* nicIndex, PathClass* path) const;
  // OS indices of the CPUs (PUs) near a GPU, for binding its proxy threads.
  Result localCpus(const std::string& gpuBusId, std::vector<int>* out) const;

  // Several lines for tessera_info: NUMA nodes, cores, GPUs, NICs, NVLink source and the
  // GPU path matrix.
  std::string summary() const;

  // Builds from an already discovered description (tests, and tools that synthesise one).
  explicit Topology(TopologyData data) : d_(std::move(data)) {}

 private:
  Result lookupGpu(const std::string& busId, int* index) const;

  TopologyData d_;
};

// "0-3,8,10-11": a CPU list in the kernel's cpulist syntax.
std::string formatCpuList(const std::vector<int>& cpus);

}  // namespace tessera
