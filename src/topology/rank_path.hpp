// The path class between two ranks, from where each lives (RankPlacement) and this host's
// topology: NET across hosts, LOC on one GPU, the GPU pair's class on one host. This is what the
// transport choice and TESSERA_P2P_LEVEL will compare against.
#pragma once

#include <memory>

#include "topology/path_class.hpp"
#include "topology/placement.hpp"
#include "topology/topology.hpp"

namespace tessera {

// `topo` describes the host of `a` (the calling rank). Host-only ranks on one host are SYS (their
// bytes cross host memory); a GPU that hwloc does not show (a container hiding part of sysfs) is
// SYS too, with an INFO line saying why.
Result rankPathClass(const Topology& topo, const RankPlacement& a, const RankPlacement& b,
                     PathClass* out);

// This process's topology (Topology::load: the live machine or TESSERA_TOPO_FILE), loaded on
// first use and shared by every communicator of the process; loaded again only when
// TESSERA_TOPO_FILE changes.
Result processTopology(std::shared_ptr<const Topology>* out);

}  // namespace tessera
