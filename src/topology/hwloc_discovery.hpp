// Fills a TopologyData from hwloc: the live machine (xmlPath empty) or an XML file. Builds
// without hwloc fill only what the OS says (CPU count) and record why PCI is missing.
#pragma once

#include <string>

#include "core/status.hpp"
#include "topology/topology_data.hpp"

namespace tessera {

// A file that is missing, not a regular file or rejected by hwloc is tsrInvalidArgument naming
// it and hwloc's complaint; an XML path in a build without hwloc is tsrInvalidUsage.
Result discoverWithHwloc(const std::string& xmlPath, TopologyData* out);

}  // namespace tessera
