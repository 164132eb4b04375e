// The fused GEMM + communication calls of the API (tsrGemmReduceScatter, tsrAllGatherGemm,
// tsrGemmAllReduce, tsrFusedWorkspaceSize, FusedGemm) and the communicator's fused executors.
// Every argument is checked before anything is written (fused::checkFusedCall says what the
// shapes, types and pointers must be); host buffers then run on the host executor and return when
// C is in place, device buffers of the communicator's GPU are enqueued on the device executor.
#include "fused/fused.hpp"

#include <cstdint>

#include "comm/api_guard.hpp"
#include "comm/buffer_place.hpp"
#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/fused_api.hpp"
#include "comm/group.hpp"
#include "core/datatype.hpp"
#include "core/log.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

// A fused call as the API received it.
struct FusedRequest {
  const char* api;
  tsrFusedOp_t op;
  const void* a;
  const void* b;
  const void* bias;
  void* c;
  void* gatheredA;
  size_t m, n, k;
  tsrDataType_t inType, outType;
  int flags;
};

constexpr int kKnownFlags = TSR_FUSED_ATOMIC | TSR_FUSED_COPY_ENGINE;

// The op and flags of the request as a FusedCall (buffers and shape included).
Result toCall(const FusedRequest& q, fused::FusedCall* call) {
  switch (q.op) {
    case tsrFusedGemmReduceScatter: call->op = fused::FusedOp::kGemmReduceScatter; break;
    case tsrFusedAllGatherGemm: call->op = fused::FusedOp::kAllGatherGemm; break;
    case tsrFusedGemmAllReduce: call->op = fused::FusedOp::kGemmAllReduce; break;
    default:
      return TSR_FAIL(tsrInvalidArgument,
                      "%s: op %d is not a tsrFusedOp_t (tsrFusedGemmReduceScatter, "
                      "tsrFusedAllGatherGemm, tsrFusedGemmAllReduce)",
                      q.api, static_cast<int>(q.op));
  }
  if ((q.flags & ~kKnownFlags) != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: flags 0x%x has unknown bits 0x%x (known: TSR_FUSED_ATOMIC = 0x%x, "
                    "TSR_FUSED_COPY_ENGINE = 0x%x)",
                    q.api, static_cast<unsigned>(q.flags),
                    static_cast<unsigned>(q.flags & ~kKnownFlags), TSR_FUSED_ATOMIC,
                    TSR_FUSED_COPY_ENGINE);
  call->a = q.a;
  call->b = q.b;
  call->bias = q.bias;
  call->c = q.c;
  call->gatheredA = q.gatheredA;
  call->shape = {q.m, q.n, q.k};
  call->inType = q.inType;
  call->outType = q.outType;
  call->atomic = (q.flags & TSR_FUSED_ATOMIC) != 0;
  call->copyEngine = (q.flags & TSR_FUSED_COPY_ENGINE) != 0;
  return tsrSuccess;
}

// Which executor can run a buffer (as collectives.cpp decides for collectives): host memory the
// host executor, device memory of this rank's GPU the device executor; every buffer of a call
// must agree. `seen`: some buffer was classified already, `device` its kind.
Result classifyBuffer(const CommImpl& comm, const char* api, const char* name, const void* ptr,
                      bool* seen, bool* device) {
  if (ptr == nullptr) return tsrSuccess;  // checkFusedCall says which may be NULL
  bool onDevice = false;
  TSR_CHECK(executorPlace(comm.cudaDevice(), api, name, ptr, &onDevice));
  if (*seen && *device != onDevice)
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: %s %p is %s memory but the other buffers are %s memory: A, B, C, bias "
                    "and gatheredA must all be host memory (host executor) or all device memory "
                    "(GPU kernels)",
                    api, name, ptr, onDevice ? "device" : "host", *device ? "device" : "host");
  *seen = true;
  *device = onDevice;
  return tsrSuccess;
}

// Everything but the executor: state, group, op and flags, where the buffers are, the shared
// checks. On success `call` is ready to run and `onDevice` says on which executor.
Result checkRequest(CommImpl& comm, const FusedRequest& q, fused::FusedCall* call, bool* onDevice) {
  TSR_CHECK(comm.checkReady(q.api));
  // The group machinery starts collectives and point-to-point calls only; a fused call's
  // collective setup would have to be ordered among them.
  if (inGroup())
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: fused calls cannot be made inside tsrGroupStart/tsrGroupEnd; make them "
                    "outside the group",
                    q.api);
  TSR_CHECK(toCall(q, call));
  bool seen = false, device = false;
  TSR_CHECK(classifyBuffer(comm, q.api, "A", q.a, &seen, &device));
  TSR_CHECK(classifyBuffer(comm, q.api, "B", q.b, &seen, &device));
  TSR_CHECK(classifyBuffer(comm, q.api, "C", q.c, &seen, &device));
  TSR_CHECK(classifyBuffer(comm, q.api, "bias", q.bias, &seen, &device));
  TSR_CHECK(classifyBuffer(comm, q.api, "gatheredA", q.gatheredA, &seen, &device));
  TSR_CHECK(fused::checkFusedCall(*call, comm.nranks(), device, q.api));
  *onDevice = device;
  return tsrSuccess;
}

// The checks of checkFusedCall that need no buffers: for the workspace query and FusedGemm's
// maximum shape.
Result checkShape(const fused::FusedCall& call, int nranks, bool onDevice, const char* api) {
  const fused::FusedShape& s = call.shape;
  if (s.m == 0 || s.n == 0 || s.k == 0)
    return TSR_FAIL(tsrInvalidArgument, "%s: M=%llu N=%llu K=%llu: every size must be positive",
                    api, static_cast<unsigned long long>(s.m), static_cast<unsigned long long>(s.n),
                    static_cast<unsigned long long>(s.k));
  if (s.m % static_cast<uint64_t>(nranks) != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: M=%llu is not a multiple of the %d ranks (each rank's segment is M/n "
                    "rows; pad M to a multiple of %d)",
                    api, static_cast<unsigned long long>(s.m), nranks, nranks);
  // 2^31 per dimension keeps every product the layout computes far inside 64 bits.
  constexpr uint64_t kDimLimit = uint64_t{1} << 31;
  if (s.m >= kDimLimit || s.n >= kDimLimit || s.k >= kDimLimit)
    return TSR_FAIL(tsrInvalidArgument, "%s: M=%llu N=%llu K=%llu: each size must be below 2^31",
                    api, static_cast<unsigned long long>(s.m), static_cast<unsigned long long>(s.n),
                    static_cast<unsigned long long>(s.k));
  const bool inOk = call.inType == tsrFloat16 || call.inType == tsrBfloat16 ||
                    (!onDevice && call.inType == tsrFloat32);
  if (!inOk)
    return TSR_FAIL(tsrInvalidArgument, "%s: input type %s: A and B must be float16 or bfloat16%s",
                    api, dtypeName(call.inType), onDevice ? " on device buffers" : " (or float32)");
  if (call.outType != tsrFloat32 && call.outType != tsrFloat16 && call.outType != tsrBfloat16)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: output type %s: C must be float32, float16 or bfloat16", api,
                    dtypeName(call.outType));
  if (call.copyEngine && call.op != fused::FusedOp::kAllGatherGemm)
    return TSR_FAIL(tsrInvalidArgument, "%s: TSR_FUSED_COPY_ENGINE applies to AllGather+GEMM only",
                    api);
  if (call.atomic && call.op == fused::FusedOp::kAllGatherGemm)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: TSR_FUSED_ATOMIC applies to the reducing ops only (AllGather+GEMM "
                    "reduces nothing)",
                    api);
  return tsrSuccess;
}

Result fusedOptions(CommImpl& comm, fused::FusedOptions* o) {
  TransportContext* ctx = nullptr;
  TSR_CHECK(comm.transports(&ctx));
  o->transports = ctx;
  o->rank = comm.rank();
  o->nranks = comm.nranks();
  o->timeoutSeconds = ctx->timeoutSeconds();  // TESSERA_TRANSPORT_TIMEOUT, as collectives
  o->cudaDevice = comm.cudaDevice() >= 0 ? comm.cudaDevice() : -1;
  return tsrSuccess;
}

Result makeHost(CommImpl& comm, std::unique_ptr<fused::HostFusedExecutor>* out) {
  fused::FusedOptions o;
  TSR_CHECK(fusedOptions(comm, &o));
  TSR_CHECK(fused::HostFusedExecutor::create(o, out));
  (*out)->setTileConfig(fused::hostTileConfig());
  return tsrSuccess;
}

Result makeDevice(CommImpl& comm, const char* api,
                  std::unique_ptr<fused::DeviceFusedExecutor>* out) {
  if (comm.cudaDevice() < 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: this rank is host-only (TSR_DEVICE_HOST): the fused GPU kernels need a "
                    "communicator bound to a GPU",
                    api);
  fused::FusedOptions o;
  TSR_CHECK(fusedOptions(comm, &o));
  TSR_CHECK(fused::DeviceFusedExecutor::create(o, out));
  (*out)->setTileConfig(fused::deviceTileConfig());
  return tsrSuccess;
}

Result issue(Communicator& comm, const FusedRequest& q, tsrStream_t stream) {
  CommImpl& impl = *commImpl(comm);
  ScopedRank scoped(impl.rank());
  fused::FusedCall call;
  bool onDevice = false;
  Result r = checkRequest(impl, q, &call, &onDevice);
  CommImpl::WorkScope work;  // tsrCommFinalize waits for the call
  if (r == tsrSuccess) r = work.enter(&impl, q.api);
  if (r == tsrSuccess) {
    if (onDevice) {
      fused::DeviceFusedExecutor* exec = nullptr;
      r = impl.fusedDevice(&exec);
      if (r == tsrSuccess) r = exec->enqueue(call, stream);
    } else {
      fused::HostFusedExecutor* exec = nullptr;
      r = impl.fusedHost(&exec);
      if (r == tsrSuccess) r = exec->run(call);
    }
  }
  return r == tsrSuccess ? r : noteCallError(impl.callFailed(r, q.api));
}

}  // namespace

Result CommImpl::fusedHost(fused::HostFusedExecutor** out) {
  TSR_CHECK(checkReady("fused setup"));
  std::lock_guard<std::mutex> lock(fusedMutex_);
  if (!fusedHost_) {
    TSR_CHECK(makeHost(*this, &fusedHost_));
    TSR_INFO("comm %016llx rank %d: fused host executor ready",
             static_cast<unsigned long long>(commHash_), rank());
  }
  *out = fusedHost_.get();
  return tsrSuccess;
}

Result CommImpl::fusedDevice(fused::DeviceFusedExecutor** out) {
  TSR_CHECK(checkReady("fused setup"));
  std::lock_guard<std::mutex> lock(fusedMutex_);
  if (!fusedDevice_) {
    TSR_CHECK(makeDevice(*this, "fused setup", &fusedDevice_));
    fusedDevicePublished_.store(fusedDevice_.get(), std::memory_order_release);
    TSR_INFO("comm %016llx rank %d: fused device executor ready on GPU %d",
             static_cast<unsigned long long>(commHash_), rank(), device_);
  }
  *out = fusedDevice_.get();
  return tsrSuccess;
}

// Entry points of the C API (fused_api.hpp).
namespace {

// The request a descriptor describes, once its size and version are known.
Result fromDesc(const char* api, const tsrFusedDesc_t* desc, FusedRequest* q) {
  if (desc == nullptr) return TSR_FAIL(tsrInvalidArgument, "%s: desc is NULL", api);
  // Every field up to flags is version 1's; a larger struct comes from a newer header whose
  // extra fields this library cannot honour, so it is refused rather than half read.
  if (desc->size != sizeof(tsrFusedDesc_t))
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: desc->size = %zu, but this library's tsrFusedDesc_t has %zu bytes: "
                    "initialize it with TSR_FUSED_DESC_INITIALIZER",
                    api, desc->size, sizeof(tsrFusedDesc_t));
  if (desc->version != TSR_FUSED_DESC_VERSION)
    return TSR_FAIL(tsrInvalidArgument,
                    "%s: desc->version = %u, this library knows version %u: initialize it with "
                    "TSR_FUSED_DESC_INITIALIZER",
                    api, desc->version, TSR_FUSED_DESC_VERSION);
  *q = {api,     desc->op, desc->A, desc->B,      desc->bias,    desc->C,    desc->gatheredA,
        desc->M, desc->N,  desc->K, desc->intype, desc->outtype, desc->flags};
  return tsrSuccess;
}

}  // namespace

tsrFusedDesc_t fusedDesc(tsrFusedOp_t op, const void* a, const void* b, const void* bias, void* c,
                         void* gatheredA, size_t m, size_t n, size_t k, tsrDataType_t inType,
                         tsrDataType_t outType, int flags) {
  tsrFusedDesc_t d = TSR_FUSED_DESC_INITIALIZER;
  d.op = op;
  d.A = a;
  d.B = b;
  d.bias = bias;
  d.C = c;
  d.gatheredA = gatheredA;
  d.M = m;
  d.N = n;
  d.K = k;
  d.intype = inType;
  d.outtype = outType;
  d.flags = flags;
  return d;
}

Result fusedApiCall(Communicator& comm, const char* api, const tsrFusedDesc_t* desc,
                    tsrStream_t stream) {
  FusedRequest q{};
  Result r = fromDesc(api, desc, &q);
  if (r != tsrSuccess) return noteCallError(r);
  return issue(comm, q, stream);
}

Result fusedApiWorkspaceSize(Communicator& comm, const char* api, const tsrFusedDesc_t* desc,
                             int onDevice, size_t* bytes) {
  CommImpl& impl = *commImpl(comm);
  ScopedRank scoped(impl.rank());
  if (bytes == nullptr) return TSR_FAIL(tsrInvalidArgument, "%s: bytes is NULL", api);
  FusedRequest q{};
  TSR_CHECK(fromDesc(api, desc, &q));
  TSR_CHECK(impl.checkReady(api));
  if (onDevice != 0 && onDevice != 1)
    return TSR_FAIL(tsrInvalidArgument, "%s: onDevice is %d (1: device buffers, 0: host buffers)",
                    api, onDevice);
  fused::FusedCall call;
  TSR_CHECK(toCall(q, &call));
  TSR_CHECK(checkShape(call, impl.nranks(), onDevice != 0, api));
  const fused::TileConfig cfg = onDevice ? fused::deviceTileConfig() : fused::hostTileConfig();
  *bytes = static_cast<size_t>(fused::workspaceBytes(call, impl.nranks(), cfg, onDevice == 0));
  return tsrSuccess;
}

// ---- FusedGemm ------------------------------------------------------------------------------

struct FusedGemm::Impl {
  CommImpl* comm = nullptr;  // the communicator outlives the object
  FusedRequest max{};        // op, types, flags and the largest shape
  bool onDevice = false;
  std::unique_ptr<fused::HostFusedExecutor> host;
  std::unique_ptr<fused::DeviceFusedExecutor> device;
};

FusedGemm::FusedGemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FusedGemm::~FusedGemm() = default;

tsrResult_t FusedGemm::create(Communicator& comm, tsrFusedOp_t op, size_t maxM, size_t maxN,
                              size_t maxK, tsrDataType_t intype, tsrDataType_t outtype, int flags,
                              bool onDevice, std::unique_ptr<FusedGemm>* out) {
  constexpr const char* kApi = "FusedGemm::create";
  return guarded(kApi, [&]() -> Result {
    CommImpl& impl = *commImpl(comm);
    ScopedRank scoped(impl.rank());
    if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "%s: out is NULL", kApi);
    out->reset();
    TSR_CHECK(impl.checkReady(kApi));
    auto p = std::make_unique<Impl>();
    p->comm = &impl;
    p->max = {"FusedGemm::run", op,      nullptr, nullptr, nullptr,
              nullptr,          nullptr, maxM,    maxN,    maxK,
              intype,           outtype, flags};
    p->onDevice = onDevice;
    fused::FusedCall call;
    FusedRequest q = p->max;
    q.api = kApi;
    TSR_CHECK(toCall(q, &call));
    TSR_CHECK(checkShape(call, impl.nranks(), onDevice, kApi));
    // The workspace for the largest shape now, so that no run() allocates.
    if (onDevice) {
      TSR_CHECK(makeDevice(impl, kApi, &p->device));
      TSR_CHECK(p->device->reserve(call, nullptr));
    } else {
      TSR_CHECK(makeHost(impl, &p->host));
      TSR_CHECK(p->host->reserve(call));
    }
    *out = std::unique_ptr<FusedGemm>(new FusedGemm(std::move(p)));
    return tsrSuccess;
  });
}

tsrResult_t FusedGemm::run(const void* A, const void* B, const void* bias, void* C, void* gatheredA,
                           size_t M, size_t N, size_t K, tsrStream_t stream) {
  const Impl& p = *impl_;
  return guarded(p.max.api, [&]() -> Result {
    ScopedRank scoped(p.comm->rank());
    FusedRequest q = p.max;
    q.a = A;
    q.b = B;
    q.bias = bias;
    q.c = C;
    q.gatheredA = gatheredA;
    q.m = M;
    q.n = N;
    q.k = K;
    Result r = tsrSuccess;
    if (M > p.max.m || N > p.max.n || K > p.max.k)
      r = TSR_FAIL(tsrInvalidArgument,
                   "%s: M=%zu N=%zu K=%zu is larger than the maximum M=%zu N=%zu K=%zu given "
                   "to FusedGemm::create",
                   q.api, M, N, K, p.max.m, p.max.n, p.max.k);
    fused::FusedCall call;
    bool onDevice = false;
    if (r == tsrSuccess) r = checkRequest(*p.comm, q, &call, &onDevice);
    if (r == tsrSuccess && onDevice != p.onDevice)
      r = TSR_FAIL(tsrInvalidUsage,
                   "%s: the buffers are %s memory, but this FusedGemm was created for %s buffers",
                   q.api, onDevice ? "device" : "host", p.onDevice ? "device" : "host");
    CommImpl::WorkScope work;  // tsrCommFinalize waits for the call
    if (r == tsrSuccess) r = work.enter(p.comm, q.api);
    if (r == tsrSuccess) r = onDevice ? p.device->enqueue(call, stream) : p.host->run(call);
    return r == tsrSuccess ? r : noteCallError(p.comm->callFailed(r, q.api));
  });
}

size_t FusedGemm::workspaceBytes() const {
  const Impl& p = *impl_;
  return static_cast<size_t>(p.onDevice ? p.device->workspaceBytes() : p.host->workspaceBytes());
}

}  // namespace tessera
