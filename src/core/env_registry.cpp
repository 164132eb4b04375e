// Every TESSERA_* variable tessera reads. Add a row here before reading a new one:
// `tessera_info --env` prints this table, and envValidateAll() checks values against it.
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/env.hpp"
#include "core/log.hpp"

namespace tessera {
namespace {

bool validSubsys(const char* v, std::string* why) {
  uint32_t mask;
  return parseSubsysMask(v, &mask, why);
}

bool validIfname(const char* v, std::string* why) {
  // NCCL syntax: optional ^ (exclude) and/or = (exact match), then a comma list of prefixes.
  std::string s = v;
  if (!s.empty() && s[0] == '^') s.erase(0, 1);
  if (!s.empty() && s[0] == '=') s.erase(0, 1);
  if (s.empty() || s.find_first_not_of(',') == std::string::npos) {
    *why = "expected a comma list of interface names or prefixes";
    return false;
  }
  return true;
}

bool validHostId(const char* v, std::string* why) {
  if (std::strlen(v) > 255) {
    *why = "longer than 255 characters";
    return false;
  }
  return true;
}

bool validTransport(const char* v, std::string* why) {
  static const char* const kNames[] = {"inproc", "shm", "ucx", "cuda_ipc", "p2p"};
  for (const char* n : kNames)
    if (strcasecmp(v, n) == 0) return true;
  *why = "expected inproc, shm, ucx, cuda_ipc or p2p";
  return false;
}

bool validP2pLevel(const char* v, std::string* why) {
  static const char* const kNames[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"};
  for (const char* n : kNames)
    if (strcasecmp(v, n) == 0) return true;
  *why = "expected LOC, NVL, PIX, PXB, PHB or SYS";
  return false;
}

bool validHostPort(const char* v, std::string* why) {
  // Syntax only; the bootstrap resolves the host (bootstrap/socket.cpp, resolveHostPort). An IPv6
  // address goes in brackets, or its last group would read as the port.
  std::string s = v;
  size_t colon = s.rfind(':');
  std::string host = colon == std::string::npos ? "" : s.substr(0, colon);
  std::string port = colon == std::string::npos ? "" : s.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find_first_of("[]:") != std::string::npos)
    host.clear();
  long p =
      port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos
          ? 0
          : std::strtol(port.c_str(), nullptr, 10);
  if (host.empty() || p < 1 || p > 65535) {
    *why = "expected host:port or [ipv6]:port with a port in [1, 65535]";
    return false;
  }
  return true;
}

bool validLibraryPath(const char* v, std::string* why) {
  // A bare name would be looked up on the library path, where the first libnccl.so.2 is likely
  // tessera's drop-in itself.
  if (std::strchr(v, '/') == nullptr) {
    *why = "expected a path with a '/' (a bare name may find tessera's own libnccl.so.2)";
    return false;
  }
  if (access(v, R_OK) != 0) {
    *why = std::string("cannot read it: ") + std::strerror(errno);
    return false;
  }
  return true;
}

constexpr EnvVarInfo kRegistry[] = {
    {"TESSERA_DEBUG", EnvType::kEnum, "WARN",
     "log level: NONE, VERSION (print the version at init), WARN, INFO or TRACE",
     "NONE|VERSION|WARN|INFO|TRACE", 0, 0, nullptr},
    {"TESSERA_DEBUG_SUBSYS", EnvType::kString, "INIT,BOOTSTRAP,ENV",
     "subsystems logged at INFO/TRACE: comma list of INIT, BOOTSTRAP, TOPO, ENV, COMM, TRANSPORT, "
     "COLL, TUNING, FUSED, ALLOC, PROXY, GRAPH, CUDA or ALL; a leading ^ excludes the list. "
     "NCCL's names are taken too: P2P, SHM, NET (TRANSPORT), CALL, RAS (COMM), REG (ALLOC), "
     "NVLS, PROFILE (COLL)",
     nullptr, 0, 0, validSubsys},
    {"TESSERA_DEBUG_FILE", EnvType::kString, "",
     "file the log goes to instead of stderr; %h expands to the host name, %p to the pid", nullptr,
     0, 0, nullptr},
    {"TESSERA_BOOTSTRAP_TIMEOUT", EnvType::kDouble, "120",
     "seconds any bootstrap operation (join, allGather, send/recv, barrier, broadcast) may wait "
     "before it fails with tsrTimeout",
     nullptr, 0.001, 1e7, nullptr},
    {"TESSERA_REVOKE_NOTICES", EnvType::kBool, "1",
     "0: a rank that revokes or aborts a communicator, or sees a fault, does not tell the others "
     "at once (they learn from their own peers and deadlines), and the process runs no revoke "
     "service (its listening socket on TESSERA_SOCKET_IFNAME's interface and thread)",
     nullptr, 0, 0, nullptr},
    {"TESSERA_SOCKET_IFNAME", EnvType::kString, "",
     "interface of the TCP bootstrap root (tsrGetUniqueId), NCCL syntax: prefixes (eth,ib), "
     "=exact names, ^excluded; default: the first non-loopback interface that is up, else "
     "loopback. Every rank listens on its address that reaches the root",
     nullptr, 0, 0, validIfname},
    {"TESSERA_SOCKET_FAMILY", EnvType::kEnum, "AUTO",
     "address family of the TCP bootstrap: AF_INET, AF_INET6 or AUTO", "AUTO|AF_INET|AF_INET6", 0,
     0, nullptr},
    {"TESSERA_COMM_ID", EnvType::kString, "",
     "host:port (or [ipv6]:port) of the TCP bootstrap root: tsrGetUniqueId then starts no root and "
     "returns an id naming that address, the same on every rank that calls it, and rank 0's "
     "tsrCommInitRank starts the root there (NCCL_COMM_ID's meaning)",
     nullptr, 0, 0, validHostPort},
    {"TESSERA_HOST_ID", EnvType::kString, "",
     "overrides this process's host identity (default: hostname + boot id); ranks with different "
     "host ids are treated as on different hosts",
     nullptr, 0, 0, validHostId},
    {"TESSERA_TOPO_FILE", EnvType::kString, "",
     "hwloc XML file to load instead of discovering the live machine", nullptr, 0, 0, nullptr},
    {"TESSERA_NVML_DISABLE", EnvType::kBool, "0",
     "do not load NVML (libnvidia-ml.so.1) for NVLink discovery", nullptr, 0, 0, nullptr},
    {"TESSERA_SPLIT_SHARE", EnvType::kInt, "0",
     "default of tsrConfig_t.splitShare: 1 lets split children share the parent's resources "
     "(stored and validated; there are no shareable resources before the transport layer)",
     nullptr, 0, 1, nullptr},
    {"TESSERA_COMM_BLOCKING", EnvType::kInt, "1",
     "default of tsrConfig_t.blocking: 0 makes communicator creation non-blocking", nullptr, 0, 1,
     nullptr},
    {"TESSERA_MIN_CTAS", EnvType::kInt, "1",
     "default of tsrConfig_t.minCTAs: the fewest CTAs of a communicator's device executor (its "
     "resident grid, or each launch in launch mode)",
     nullptr, 1, 64, nullptr},
    {"TESSERA_MAX_CTAS", EnvType::kInt, "2",
     "default of tsrConfig_t.maxCTAs: the device executor's grid has this many CTAs (at least "
     "minCTAs); a plan's workers are spread over them. Unset: 8 on a GPU (a ring per CTA, "
     "crossing between nodes over 8 NICs), 2 in the device emulation. Ranks sharing one GPU "
     "each hold a grid, and every grid must be resident at once",
     nullptr, 1, 64, nullptr},
    {"TESSERA_LAUNCH", EnvType::kEnum, "PERSISTENT",
     "how the device executor runs calls on device buffers (case-insensitive): persistent: a "
     "resident grid per communicator polls a work queue (stream-ordered through stream memory "
     "operations; see the README's hazards); kernel: one launch per call",
     "PERSISTENT|KERNEL", 0, 0, nullptr},
    {"TESSERA_DEVICE_THREADS", EnvType::kInt, "256",
     "threads per CTA of the device executor (a multiple of 32, at most 256: the kernels' launch "
     "bound)",
     nullptr, 32, 256, nullptr},
    {"TESSERA_FUSED_SM90", EnvType::kBool, "1",
     "the fused GEMM on compute capability 9.x GPUs: 1 runs the TMA/wgmma kernel (built where "
     "TESSERA_CUDA_ARCHS has 90), 0 the mma.sync kernel every GPU runs; read when a fused GPU "
     "executor is made",
     nullptr, 0, 0, nullptr},
    {"TESSERA_FUSED_TILE_M", EnvType::kInt, "0",
     "rows of the fused ops' GEMM tile (0: the executor's default, 64 on the host, 128 on the "
     "GPU; the GPU kernels accept only the sizes they were compiled for)",
     nullptr, 0, 4096, nullptr},
    {"TESSERA_FUSED_TILE_N", EnvType::kInt, "0",
     "columns of the fused ops' GEMM tile (0: the executor's default, as TESSERA_FUSED_TILE_M)",
     nullptr, 0, 4096, nullptr},
    {"TESSERA_FUSED_COMM_M", EnvType::kInt, "0",
     "rows of the fused ops' communication tile (the unit of signalling), in GEMM tiles (0: 1)",
     nullptr, 0, 1024, nullptr},
    {"TESSERA_FUSED_COMM_N", EnvType::kInt, "0",
     "columns of the fused ops' communication tile, in GEMM tiles (0: 1)", nullptr, 0, 1024,
     nullptr},
    {"TESSERA_TRANSPORT", EnvType::kString, "",
     "forces one transport for every peer: inproc, shm, ucx, cuda_ipc or p2p (default: chosen per "
     "pair of ranks from where they run); a peer the forced transport cannot reach is an error",
     nullptr, 0, 0, validTransport},
    {"TESSERA_P2P_LEVEL", EnvType::kString, "SYS",
     "the farthest GPU path (NCCL's LOC, NVL, PIX, PXB, PHB or SYS) over which GPUs of one host "
     "use p2p or cuda_ipc; GPUs farther apart go through host memory (ucx)",
     nullptr, 0, 0, validP2pLevel},
    {"TESSERA_TRANSPORT_TIMEOUT", EnvType::kDouble, "300",
     "seconds a transport wait (semaphore, flush, proxy FIFO, connection setup) may take before "
     "it fails with tsrTimeout naming rank, peer and operation",
     nullptr, 0.001, 1e7, nullptr},
    {"TESSERA_DUMP_ON_TIMEOUT", EnvType::kBool, "0",
     "1: a call whose wait passes its deadline logs what each of its operations waits for "
     "(collective, call number, plan step, semaphore value expected and seen) and sends SIGUSR1 "
     "to the same host's processes of its communicators; a process with it set logs its "
     "waiting calls the same way on SIGUSR1 (kill -USR1 PID by hand too)",
     nullptr, 0, 0, nullptr},
    {"TESSERA_ALGO", EnvType::kString, "",
     "algorithms the tuner may pick, in NCCL's syntax: \"ring,tree\" (only these), \"^tree\" (all "
     "but), \"allreduce:ring;allgather:^rhd\" (per collective); families: ring, tree, rhd, "
     "oneshot, "
     "twoshot, pairwise, hier (checked when a communicator first runs a collective)",
     nullptr, 0, 0, nullptr},
    {"TESSERA_PROTO", EnvType::kString, "",
     "protocols the tuner may pick, in NCCL's syntax (\"simple\", \"^ll\", \"ll\"): Simple (bulk "
     "chunks and semaphores) or LL (small calls: on device buffers 8-byte lines of 4 data and 4 "
     "flag bytes; on host buffers 64-byte lines of 56 data and 8 flag bytes, all-reduce, "
     "all-gather and reduce-scatter of up to 4 KiB, to 16 KiB a message with \"ll\"); a value "
     "that leaves none is an error",
     nullptr, 0, 0, nullptr},
    {"TESSERA_DETERMINISTIC", EnvType::kBool, "0",
     "1: reducing collectives use only algorithms that combine ranks in one fixed order (0, 1, "
     "..., "
     "n-1), so floating-point results do not depend on the algorithm, message size or rank count "
     "grouping",
     nullptr, 0, 0, nullptr},
    {"TESSERA_TUNER_FILE", EnvType::kString, "",
     "JSON file with the tuner's alpha-beta parameters per transport and its measured table (what "
     "tessera_tune writes; see collectives/tuner); default: this host's cached file, else "
     "built-in values",
     nullptr, 0, 0, nullptr},
    {"TESSERA_TUNER_CACHE", EnvType::kBool, "1",
     "0: without TESSERA_TUNER_FILE, do not read this host's cached tuner file "
     "($XDG_CACHE_HOME or ~/.cache, tessera/tuner-<host>.json, written by tessera_tune)",
     nullptr, 0, 0, nullptr},
    {"TESSERA_ZERO_COPY_MIN_BYTES", EnvType::kInt, "262144",
     "calls of at least this many bytes exchange buffer registrations first and, when every "
     "rank's buffers are registered and mapped, run zero-copy plans",
     nullptr, 0, 1099511627776.0, nullptr},
    {"TESSERA_CMA", EnvType::kBool, "1",
     "0: no cross-memory attach (process_vm_readv/writev) between processes of a host, so "
     "collectives on unregistered buffers always stage through the scratch",
     nullptr, 0, 0, nullptr},
    {"TESSERA_PROFILE", EnvType::kBool, "0",
     "1: the host executor times its ops and, when a communicator is destroyed, prints one line "
     "per rank on standard error: time in copies and reductions (with the bytes they wrote), in "
     "waits, and asleep (collectives/exec/profile.hpp)",
     nullptr, 0, 0, nullptr},
    {"TESSERA_WAIT_SPIN_US", EnvType::kInt, "50",
     "microseconds a host thread waiting for a peer spins on a core of its own before it parks on "
     "a futex (a thread that finds its core shared parks at once; src/core/park.hpp)",
     nullptr, 0, 10000000, nullptr},
    {"TESSERA_WAIT_PARK", EnvType::kBool, "1",
     "0: waiting host threads never park on a futex (they spin, yield and sleep, as before "
     "parking existed); for comparisons",
     nullptr, 0, 0, nullptr},
    {"TESSERA_NCCL_ENV", EnvType::kBool, "0",
     "1: NCCL_* variables are read as aliases of the TESSERA_* ones they map onto, where the "
     "TESSERA_* variable is unset (tessera's NCCL drop-in libnccl.so.2 sets it to 1 when it loads, "
     "unless it is set)",
     nullptr, 0, 0, nullptr},
    // Read by the NCCL drop-in (src/nccl/) with getenv; declared here to be listed and checked.
    {"TESSERA_NCCL_FALLBACK", EnvType::kString, "",
     "path of NVIDIA's libnccl.so.2: tessera's NCCL drop-in forwards to it, over a shadow "
     "communicator, the collectives (outside groups) tessera refuses (opened "
     "RTLD_LOCAL|RTLD_DEEPBIND); unset: nothing is forwarded",
     nullptr, 0, 0, validLibraryPath},
    // Read by tessera_torch (python/), not by the library: declared here so they are listed and
    // checked like every other.
    {"TESSERA_TORCH_CHECK_CALLS", EnvType::kBool, "0",
     "tessera_torch: 1 compares every collective's call (dtype, sizes, reduce op, root) between "
     "the ranks of its group before it runs, one small all-gather more per call; a call that "
     "differs raises naming both ranks' calls instead of computing garbage or waiting for the "
     "deadline",
     nullptr, 0, 0, nullptr},
    {"TESSERA_TORCH_ANY_SOURCE_RANKS", EnvType::kInt, "32",
     "tessera_torch: process groups of up to this many ranks link every pair of ranks for sends "
     "and receives when they are made (512 KiB of host memory per peer), which dist.recv / irecv "
     "without a source needs; larger groups refuse those with a sentence; 0: never",
     nullptr, 0, 1 << 30, nullptr},
    {"TESSERA_BUILD_DIR", EnvType::kString, "",
     "python/setup.py (pip install ./python): the tessera build folder whose libtessera.so and "
     "headers tessera_torch builds against; default: CMAKE_PREFIX_PATH, then the checkout's "
     "build/, then /usr/local and /usr",
     nullptr, 0, 0, nullptr},
    {"TESSERA_TORCH_CUDA", EnvType::kBool, "1",
     "python/setup.py: 0 builds tessera_torch without CUDA tensors even where torch and the CUDA "
     "toolkit have CUDA",
     nullptr, 0, 0, nullptr},
    {"TESSERA_SCRATCH_BYTES", EnvType::kInt, "2097152",
     "bytes of staging memory per plan and rank; larger messages are pipelined through it in "
     "slices (2 MiB: on the CI machine class 8 MiB halved all-gather bandwidth, the slices no "
     "longer staying in cache between the two copies). Unset, the device executor on a GPU "
     "takes 64 MiB (a staged step costs a signal's microseconds: it needs large slices)",
     nullptr, 4096, 1099511627776.0, nullptr},
};

// NCCL_* aliases (read while TESSERA_NCCL_ENV=1): only where NCCL's meaning is tessera's and
// NCCL's values are ones tessera takes, or refuses with a sentence naming the NCCL_* variable
// (NCCL_DEBUG=ABORT, NCCL_DEBUG_SUBSYS=NET, NCCL_ALGO=NVLS, NCCL_PROTO=LL128 alone, a numeric
// NCCL_P2P_LEVEL): a job then fails at init saying why instead of running otherwise than it asks.
// Not aliased: NCCL_TOPO_FILE (NCCL's own topology XML, which augments detection; tessera's is
// hwloc XML replacing it), and every NCCL variable tessera has no counterpart of.
constexpr EnvAlias kNcclAliases[] = {
    {"TESSERA_DEBUG", "NCCL_DEBUG"},
    {"TESSERA_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS"},
    {"TESSERA_DEBUG_FILE", "NCCL_DEBUG_FILE"},
    {"TESSERA_ALGO", "NCCL_ALGO"},
    {"TESSERA_PROTO", "NCCL_PROTO"},
    {"TESSERA_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"},
    {"TESSERA_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY"},
    {"TESSERA_COMM_ID", "NCCL_COMM_ID"},
    {"TESSERA_P2P_LEVEL", "NCCL_P2P_LEVEL"},
    {"TESSERA_MIN_CTAS", "NCCL_MIN_CTAS"},
    {"TESSERA_MAX_CTAS", "NCCL_MAX_CTAS"},
    {"TESSERA_COMM_BLOCKING", "NCCL_COMM_BLOCKING"},
    {"TESSERA_SPLIT_SHARE", "NCCL_COMM_SPLIT_SHARE_RESOURCES"},
    {"TESSERA_HOST_ID", "NCCL_HOSTID"},
};

}  // namespace

std::span<const EnvVarInfo> envRegistry() { return std::span<const EnvVarInfo>(kRegistry); }

std::span<const EnvAlias> envNcclAliases() { return std::span<const EnvAlias>(kNcclAliases); }

}  // namespace tessera
