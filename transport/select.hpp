// Which transport joins two ranks (DESIGN.md, "Topology"): a pure function of where they are,
// what this build has and the two override variables, so it is tested on its own.
//
//   same process:  GPU ranks -> p2p (same GPU, or a path within TESSERA_P2P_LEVEL); else inproc
//   same host:     GPU ranks -> cuda_ipc (path within TESSERA_P2P_LEVEL); else shm; but ucx
//                  between different network namespaces (shm's and cuda_ipc's fd server is an
//                  abstract Unix socket, which does not cross them)
//   other host:    ucx
// A GPU pair beyond TESSERA_P2P_LEVEL goes through the network stack: ucx. That needs a UCX
// built with CUDA support for device buffers; without it (Debian's UCX) the connection is made
// but device memory cannot be registered, and staging through pinned host memory is not
// implemented yet (the ucx transport says so).
// TESSERA_TRANSPORT=<name> forces one transport for every peer; a peer it cannot reach is an
// error naming both.
#pragma once

#include <string>

#include "core/status.hpp"
#include "topology/path_class.hpp"
#include "topology/placement.hpp"
#include "transport/types.hpp"

namespace tessera {

struct SelectInput {
  Locality locality = Locality::kSameProcess;
  bool sameNetNs = true;                 // one network namespace (sameNetNamespace)
  bool gpuRanks = false;                 // both ranks have a GPU
  PathClass gpuPath = PathClass::kSys;   // between the two GPUs, when gpuRanks
  PathClass p2pLevel = PathClass::kSys;  // TESSERA_P2P_LEVEL (NCCL's default: up to SYS)
  bool built[kTransportKinds] = {};      // what this build has
  bool forced = false;                   // TESSERA_TRANSPORT set
  TransportKind forcedKind = TransportKind::kInproc;
};

// The transport and a sentence saying why ("same host, GPUs PXB <= P2P level SYS: cuda_ipc").
// tsrInvalidUsage when nothing built can reach the peer, or the forced one cannot.
Result selectTransportFor(const SelectInput& in, TransportKind* out, std::string* why);

// TESSERA_TRANSPORT and TESSERA_P2P_LEVEL into `in` (tsrInvalidArgument for a bad value).
Result readSelectEnv(SelectInput* in);

}  // namespace tessera
