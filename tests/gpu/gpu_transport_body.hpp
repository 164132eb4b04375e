// The rank body shared by the cuda_ipc and p2p tests: connects to every peer over a GPU
// transport and checks put/get/signal through host calls, then through kernels with memory
// channel handles, then a port channel driven from a kernel.
#pragma once

#include <string>

#include "transport/context.hpp"
#include "transport/types.hpp"

namespace tessera::test {

struct GpuRoundTrip {
  TransportKind kind = TransportKind::kP2p;
  bool autoSelect = false;        // let the context pick the transport, then check it picked `kind`
  bool legacyAllocation = false;  // cudaMalloc memory (legacy IPC handles) instead of cuMem VMM
  size_t slotBytes = 64 << 10;
};

// "" when every check passed on this rank; else what failed.
std::string gpuTransportRoundTrip(TransportContext& ctx, const GpuRoundTrip& options);

}  // namespace tessera::test
