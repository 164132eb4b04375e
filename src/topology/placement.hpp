// Where a rank runs: which host, which process, which GPU. Ranks exchange RankPlacement as raw
// bytes (bootstrap allGather), so it is a fixed-size, trivially copyable record.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/status.hpp"

namespace tessera {

// TESSERA_HOST_ID when set, else "<hostname>:<kernel boot id>", so that two containers that share
// a host name but not a boot (or two boots of one machine) are different hosts.
Result hostId(std::string* out);

inline constexpr size_t kHostIdBytes = 256;  // TESSERA_HOST_ID is at most 255 characters
inline constexpr size_t kPlacementBusIdBytes = 32;

struct RankPlacement {
  // FNV-1a of the full host id; compared together with hostId, which may be truncated.
  uint64_t hostHash;
  // Random per process (renewed after fork): pids repeat across pid namespaces.
  uint64_t processNonce;
  // Inode of /proc/self/ns/net (0: unknown). Ranks of one host in different network namespaces
  // cannot reach each other's abstract Unix sockets (shm's and cuda_ipc's fd server).
  uint64_t netNs;
  int32_t pid;
  int32_t cudaDevice;                // -1: host memory only
  char hostId[kHostIdBytes];         // NUL-terminated, truncated if longer
  char busId[kPlacementBusIdBytes];  // canonical "0000:3b:00.0", "" when no GPU
};
static_assert(std::is_trivially_copyable_v<RankPlacement>);
static_assert(std::is_standard_layout_v<RankPlacement>);
static_assert(sizeof(RankPlacement) == 8 + 8 + 8 + 4 + 4 + kHostIdBytes + kPlacementBusIdBytes);

// This process's placement. `busId` may be nullptr or "" (no GPU); otherwise it must parse as a
// PCI bus id (tsrInvalidArgument otherwise) and is stored in canonical form. Fails when
// TESSERA_HOST_ID is invalid.
Result localPlacement(int cudaDevice, const char* busId, RankPlacement* out);

enum class Locality { kSameProcess, kSameHost, kOtherHost };
const char* localityName(Locality l);  // "same process", "same host", "other host"

Locality locality(const RankPlacement& a, const RankPlacement& b);

// Whether both run in one network namespace (true where either could not tell).
bool sameNetNamespace(const RankPlacement& a, const RankPlacement& b);

// The same GPU (same host and same bus id); false when either has no GPU.
bool sameGpu(const RankPlacement& a, const RankPlacement& b);

}  // namespace tessera
