// The checks, sizes and tile configuration every fused executor shares (fused.hpp).
#include "fused/fused.hpp"

#include <cstdint>

#include "core/datatype.hpp"
#include "core/env.hpp"
#include "core/log.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

bool overlaps(const void* a, uint64_t aBytes, const void* b, uint64_t bBytes) {
  return a && b && aBytes > 0 && bBytes > 0 && addr(a) < addr(b) + bBytes &&
         addr(b) < addr(a) + aBytes;
}

bool isInputType(tsrDataType_t t, bool onDevice) {
  return t == tsrFloat16 || t == tsrBfloat16 || (!onDevice && t == tsrFloat32);
}
bool isOutputType(tsrDataType_t t) {
  return t == tsrFloat32 || t == tsrFloat16 || t == tsrBfloat16;
}

// a * b * c bytes, false when it overflows 2^62 (every offset the executors compute stays far
// below what uint64 holds).
bool product(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  if (a != 0 && b > kLimit / a) return false;
  uint64_t ab = a * b;
  if (ab != 0 && c > kLimit / ab) return false;
  *out = ab * c;
  return true;
}

uint32_t envTile(const char* name, uint32_t fallback) {
  int64_t v = 0;
  if (envInt(name, &v) != tsrSuccess || v <= 0) return fallback;
  return static_cast<uint32_t>(v);
}

TileConfig tileConfigFromEnv(TileConfig cfg) {
  cfg.tileM = envTile("TESSERA_FUSED_TILE_M", cfg.tileM);
  cfg.tileN = envTile("TESSERA_FUSED_TILE_N", cfg.tileN);
  cfg.commM = envTile("TESSERA_FUSED_COMM_M", cfg.commM);
  cfg.commN = envTile("TESSERA_FUSED_COMM_N", cfg.commN);
  return cfg;
}
}  // namespace

const char* fusedOpName(FusedOp op) {
  switch (op) {
    case FusedOp::kGemmReduceScatter: return "gemm_reducescatter";
    case FusedOp::kAllGatherGemm: return "allgather_gemm";
    case FusedOp::kGemmAllReduce: return "gemm_allreduce";
  }
  return "invalid";
}

Result checkFusedCall(const FusedCall& call, int nranks, bool onDevice, const char* api) {
  const FusedShape& s = call.shape;
  if (call.op != FusedOp::kGemmReduceScatter && call.op != FusedOp::kAllGatherGemm &&
      call.op != FusedOp::kGemmAllReduce)
    return TSR_FAIL(tsrInvalidArgument, "%s: unknown fused op %d", api, static_cast<int>(call.op));
  if (!call.a) return TSR_FAIL(tsrInvalidArgument, "%s: A is NULL", api);
  if (!call.b) return TSR_FAIL(tsrInvalidArgument, "%s: B is NULL", api);
  if (!call.c) return TSR_FAIL(tsrInvalidArgument, "%s: C is NULL", api);
  if (s.m == 0 || s.n == 0 || s.k == 0)
    return TSR_FAIL(tsrInvalidArgument, "%s: M=%llu N=%llu K=%llu: every size must be positive",
                    api, static_cast<unsigned long long>(s.m), static_cast<unsigned long long>(s.n),
                    static_cast<unsigned long long>(s.k));
  if (nranks <= 0 || s.m % static_cast<uint64_t>(nranks) != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: M=%llu is not a multiple of the %d ranks (each rank's segment is M/n "
                    "rows; pad M to a multiple of %d)",
                    api, static_cast<unsigned long long>(s.m), nranks, nranks);
  if (!isInputType(call.inType, onDevice))
    return TSR_FAIL(tsrInvalidArgument, "%s: input type %s: A and B must be float16 or bfloat16%s",
                    api, dtypeName(call.inType), onDevice ? " on device buffers" : " (or float32)");
  if (!isOutputType(call.outType))
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: output type %s: C must be float32, float16 or bfloat16", api,
                    dtypeName(call.outType));
  if (call.gatheredA && call.op != FusedOp::kAllGatherGemm)
    return TSR_FAIL(tsrInvalidArgument, "%s: gatheredA is only for AllGather+GEMM", api);
  if (call.copyEngine && call.op != FusedOp::kAllGatherGemm)
    return TSR_FAIL(tsrInvalidArgument, "%s: TSR_FUSED_COPY_ENGINE applies to AllGather+GEMM only",
                    api);
  if (call.atomic && call.op == FusedOp::kAllGatherGemm)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: TSR_FUSED_ATOMIC applies to the reducing ops only (AllGather+GEMM "
                    "reduces nothing)",
                    api);

  const uint64_t n = static_cast<uint64_t>(nranks);
  const uint64_t in = dtypeSize(call.inType), out = dtypeSize(call.outType);
  const bool gather = call.op == FusedOp::kAllGatherGemm;
  const uint64_t aRows = gather ? s.m / n : s.m;
  const uint64_t cRows = call.op == FusedOp::kGemmReduceScatter ? s.m / n : s.m;
  uint64_t aBytes = 0, bBytes = 0, cBytes = 0, gBytes = 0, accBytes = 0;
  if (!product(aRows, s.k, in, &aBytes) || !product(s.k, s.n, in, &bBytes) ||
      !product(cRows, s.n, out, &cBytes) || !product(s.m, s.k, in, &gBytes) ||
      !product(s.m, s.n, 4, &accBytes))
    return TSR_FAIL(tsrInvalidArgument, "%s: M=%llu N=%llu K=%llu is too large", api,
                    static_cast<unsigned long long>(s.m), static_cast<unsigned long long>(s.n),
                    static_cast<unsigned long long>(s.k));
  const uint64_t biasBytes = s.n * out;
  if (overlaps(call.c, cBytes, call.a, aBytes) || overlaps(call.c, cBytes, call.b, bBytes) ||
      overlaps(call.c, cBytes, call.bias, biasBytes))
    return TSR_FAIL(tsrInvalidArgument, "%s: C overlaps A, B or bias (no in-place form)", api);
  if (call.gatheredA && (overlaps(call.gatheredA, gBytes, call.c, cBytes) ||
                         overlaps(call.gatheredA, gBytes, call.a, aBytes) ||
                         overlaps(call.gatheredA, gBytes, call.b, bBytes)))
    return TSR_FAIL(tsrInvalidArgument, "%s: gatheredA overlaps A, B or C", api);
  return tsrSuccess;
}

uint64_t workspaceBytes(const FusedCall& call, int nranks, const TileConfig& cfg,
                        bool hostStaging) {
  TileScheduler s = TileScheduler::make(call.op, 0, static_cast<uint32_t>(nranks), call.shape.m,
                                        call.shape.n, cfg);
  WorkspaceLayout l =
      workspaceLayout(s, call.shape.k, static_cast<uint32_t>(dtypeSize(call.inType)),
                      static_cast<uint32_t>(dtypeSize(call.outType)), call.atomic, hostStaging);
  return l.total;
}

TileConfig hostTileConfig() {
  TileConfig cfg;
  cfg.tileM = 64;
  cfg.tileN = 64;
  cfg.commM = 1;
  cfg.commN = 1;
  return tileConfigFromEnv(cfg);
}

TileConfig deviceTileConfig() {
  TileConfig cfg;  // 128 x 128 GEMM tiles; a communication tile is one GEMM tile
  return tileConfigFromEnv(cfg);
}

}  // namespace tessera::fused
