// NVLink discovery through NVML, loaded at run time with dlopen so that tessera neither links
// nor needs the driver's libnvidia-ml.so.1 (machines without a GPU have none).
#pragma once

#include <string>
#include <vector>

#include "topology/pci_bus_id.hpp"
#include "topology/topology_data.hpp"

namespace tessera {

// Asks NVML which NVLinks of `gpus` are active and what is at their far end. On success fills
// `out` (sized for gpus) and returns true; returns false with the reason in `why` when NVML
// cannot be used (library absent, a symbol missing, nvmlInit failing). GPUs NVML does not know
// are left without links. `library` is a dlopen name or path (tests pass a fake one).
bool nvmlQueryNvlinks(const std::string& library, const std::vector<PciBusId>& gpus,
                      NvlinkEdges* out, std::string* why);

}  // namespace tessera
