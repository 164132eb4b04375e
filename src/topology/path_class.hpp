// How far apart two GPUs (or a GPU and a NIC) are, in NCCL's vocabulary, so that
// TESSERA_P2P_LEVEL and the transport choice read the same way NCCL users already know.
#pragma once

#include "core/status.hpp"

namespace tessera {

// Ordered from nearest to farthest: a larger value is a longer path.
enum class PathClass : int {
  kLoc = 0,  // the same GPU
  kNvl = 1,  // NVLink, direct or through NVSwitches
  kPix = 2,  // at most one PCIe switch between the two
  kPxb = 3,  // several PCIe bridges, but not the host bridge
  kPhb = 4,  // through a PCIe host bridge (same CPU socket / NUMA node)
  kSys = 5,  // across the SMP interconnect between NUMA nodes or sockets
  kNet = 6,  // across the network (different hosts)
};

inline constexpr int kNumPathClasses = 7;

// "LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET".
const char* pathClassName(PathClass c);

// Case-insensitive inverse of pathClassName. tsrInvalidArgument with a sentence naming the text
// and the accepted names otherwise.
Result parsePathClass(const char* text, PathClass* out);

}  // namespace tessera
