// The fused layer's calls and executors (DESIGN.md, "Fused"): tensor-parallel linear layers whose
// communication happens inside the GEMM. src/comm validates nothing about shapes itself: it hands
// a FusedCall to checkFusedCall() and then to the FusedEngine of the communicator rank.
//
// Semantics, row-major, n ranks (FusedShape says which dimension is whose):
// - GEMM+ReduceScatter: rank r holds A_r (M x K_r), B_r (K_r x N); C = sum_r A_r B_r (+ bias,
//   added once) and rank r receives rows [r M/n, (r+1) M/n) of C (M/n x N).
// - AllGather+GEMM: rank r holds A_r (M/n x K), B_r (K x N_r); every rank gets
//   C_r = [A_0; ...; A_{n-1}] B_r (+ bias_r) (M x N_r) and, when asked, the gathered A (M x K).
// - GEMM+AllReduce: as ReduceScatter, but every rank receives all of C (M x N).
// Accumulation is float (double in the serial test references). Partials travel as float. The
// deterministic mode reduces the n partials in rank order 0..n-1, so results are bitwise
// repeatable; the atomic mode adds them in arrival order.
//
// Calls are collective and matched by order, like collectives: every rank makes the same fused
// calls with the same op, shape, types and flags. The workspace (registered memory every peer
// reaches) is kept between calls; a call whose layout differs from the previous call's costs a
// barrier among the ranks (the counters are reset), and a larger one re-allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.hpp"
#include "fused/layout.hpp"
#include "fused/tile_scheduler.hpp"
#include "tessera/tessera.h"

namespace tessera {
class TransportContext;
}

namespace tessera::fused {

struct FusedShape {
  uint64_t m = 0;  // rows of the full C (all three ops); M / n rows per segment
  uint64_t n = 0;  // columns of this rank's C: N (ReduceScatter, AllReduce) or N_r (AllGather)
  uint64_t k = 0;  // inner dimension on this rank: K_r (ReduceScatter, AllReduce) or K (AllGather)
};

struct FusedCall {
  FusedOp op = FusedOp::kGemmReduceScatter;
  const void* a = nullptr;     // RS/AR: M x K_r; AG: M/n x K (this rank's shard)
  const void* b = nullptr;     // K x N, row-major
  const void* bias = nullptr;  // optional: N elements of outType (RS/AR: C's; AG: this rank's N_r)
  void* c = nullptr;           // RS: M/n x N; AG: M x N_r; AR: M x N (outType)
  void* gatheredA = nullptr;   // AG only, optional: M x K of inType
  FusedShape shape;
  tsrDataType_t inType = tsrFloat32;   // A and B
  tsrDataType_t outType = tsrFloat32;  // C and bias
  bool atomic = false;      // TSR_FUSED_ATOMIC: accumulate partials atomically (not repeatable)
  bool copyEngine = false;  // TSR_FUSED_COPY_ENGINE: AG shards by copy engine (GPU), else SMs
};

const char* fusedOpName(FusedOp op);  // "gemm_reducescatter", "allgather_gemm", "gemm_allreduce"

// The checks every executor shares (tsrInvalidArgument with a sentence naming the constraint, and
// nothing written): pointers, M a multiple of nranks, sizes positive and within range, types
// (inputs float32, float16 or bfloat16; output float32, float16 or bfloat16; float32 inputs only
// on host buffers), flags that apply to the op, and that C overlaps none of the inputs.
Result checkFusedCall(const FusedCall& call, int nranks, bool onDevice, const char* api);

// Bytes of the workspace a rank of `nranks` needs for `call` with tiles `cfg` (what
// tsrFusedWorkspaceSize reports; the host executor adds its staging tiles).
uint64_t workspaceBytes(const FusedCall& call, int nranks, const TileConfig& cfg, bool hostStaging);

// The tile configuration the executors use: TESSERA_FUSED_TILE_M / _N / _COMM_M / _COMM_N
// (declared in the env registry) over the defaults of TileConfig; host and device may differ.
TileConfig hostTileConfig();
TileConfig deviceTileConfig();

struct FusedOptions {
  TransportContext* transports = nullptr;  // required; outlives the executor
  int rank = 0;
  int nranks = 1;
  double timeoutSeconds = 300;  // every wait's deadline
  int cudaDevice = -1;          // the device executor's GPU
};

// The host reference executor (fused/host): the scheduler and signalling over the host
// transports (thread and process ranks, inproc, shm and ucx alike: puts and atomic adds through
// each peer's Connection), with a tiled host GEMM. Host buffers; returns when this rank's output
// is in place. Used by the tests as the oracle of the GPU kernels' protocol.
class HostFusedExecutor {
 public:
  static Result create(const FusedOptions& options, std::unique_ptr<HostFusedExecutor>* out);
  virtual ~HostFusedExecutor() = default;
  // `call` has passed checkFusedCall. Collective.
  virtual Result run(const FusedCall& call) = 0;
  // Makes the workspace fit `call` now (collective), so that later calls of that shape do not
  // allocate.
  virtual Result reserve(const FusedCall& call) = 0;
  virtual uint64_t workspaceBytes() const = 0;
  // Tile sizes (tests use small tiles to get many tiles and edge tiles).
  virtual void setTileConfig(const TileConfig& cfg) = 0;
};

// The GPU executor (fused/device): CUTLASS/CuTe mainloop with tessera's epilogue, which stores
// each finished tile into its owner's partial slot through the peer mapping and signals the
// tile's counter. Device buffers of this rank's GPU; stream-ordered. Without CUDA or CUTLASS,
// create() fails with tsrInvalidUsage and a sentence saying which is missing.
class DeviceFusedExecutor {
 public:
  static Result create(const FusedOptions& options, std::unique_ptr<DeviceFusedExecutor>* out);
  virtual ~DeviceFusedExecutor() = default;
  // `call` has passed checkFusedCall(onDevice = true). Collective; ordered on `stream` (a
  // cudaStream_t). May block for workspace setup (collective) on the first call of a layout.
  virtual Result enqueue(const FusedCall& call, void* stream) = 0;
  virtual Result reserve(const FusedCall& call, void* stream) = 0;
  virtual uint64_t workspaceBytes() const = 0;
  virtual void setTileConfig(const TileConfig& cfg) = 0;
  // The first failure of this rank's fused kernels (a wait past its deadline, or abort()), read
  // without blocking: tsrSuccess while there is none. Any thread (tsrCommGetAsyncError).
  virtual Result asyncError() = 0;
  // Makes every wait of this rank's fused kernels give up now (tsrCommAbort), so the streams they
  // hold go on; later calls fail. Any thread.
  virtual void abort() = 0;
  // Whether this build has the GPU kernels, and if not, why not.
  static bool available(std::string* whyNot);
};

}  // namespace tessera::fused
