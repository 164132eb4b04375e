// DeviceFusedEngine's lifetime, workspace, re-baseline and errors (device_engine.hpp).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_stream.hpp"
#include "core/cuda/device_guard.hpp"
#include "core/cuda/fault_words.hpp"
#include "core/datatype.hpp"
#include "core/deadline.hpp"
#include "core/idle_release.hpp"
#include "core/log.hpp"
#include "fused/device/device_engine.hpp"
#include "fused/device/kernels.hpp"
#include "transport/context.hpp"

namespace tessera::fused {
namespace {
constexpr Subsys kLogSubsys = Subsys::kFused;

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

const char* kernelName(uint32_t k) {
  switch (k) {
    case kKernelGemm: return "GEMM";
    case kKernelReduce: return "reduce";
    case kKernelGatherCopy: return "gather copy";
    case kKernelShardSend: return "shard send";
    case kKernelCopyEngineWait: return "copy engine wait";
    default: return "?";
  }
}

std::string recordSentence(int rank, const FusedErrorRecord& r, double seconds) {
  const auto seen = static_cast<unsigned long long>(r.seen);
  const auto expected = static_cast<unsigned long long>(r.expected);
  std::string what;
  if (r.wait == kWaitDone)
    what = strprintf("rank %d to finish its previous fused call (done word %llu, needed %llu)",
                     r.peer, seen, expected);
  else if (r.wait == kWaitTileCounter)
    what = strprintf(
        "every rank's partial tiles of communication tile %u (%llu tile signals, "
        "needed %llu)",
        r.index, seen, expected);
  else
    what = strprintf("rank %d's data %u in the gather region (flag %llu, needed %llu)", r.peer,
                     r.index, seen, expected);
  return strprintf(
      "rank %d: the fused %s kernel of call %llu (counted from the last layout change) waited "
      "%.3g s for %s: a peer is late, stopped or failed; this rank's fused GPU executor is "
      "unusable from here on",
      rank, kernelName(r.kernel), static_cast<unsigned long long>(r.callIndex), seconds,
      what.c_str());
}

}  // namespace

Result DeviceFusedExecutor::create(const FusedOptions& options,
                                   std::unique_ptr<DeviceFusedExecutor>* out) {
  if (options.transports == nullptr)
    return TSR_FAIL(tsrInvalidUsage, "the fused GPU executor needs a transport context");
  if (options.nranks < 1 || options.rank < 0 || options.rank >= options.nranks)
    return TSR_FAIL(tsrInvalidArgument, "the fused GPU executor got rank %d of %d", options.rank,
                    options.nranks);
  if (options.cudaDevice < 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: the fused GPU executor needs a CUDA device (cudaDevice is %d)",
                    options.rank, options.cudaDevice);
  // Every wait's deadline: 0 would fail every wait not already met, NaN has no conversion.
  if (!(options.timeoutSeconds > 0))
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: the fused GPU executor's timeout must be positive (got %g s)",
                    options.rank, options.timeoutSeconds);
  auto engine = std::make_unique<DeviceFusedEngine>(options);
  TSR_CHECK(engine->init());
  *out = std::move(engine);
  return tsrSuccess;
}

bool DeviceFusedExecutor::available(std::string* whyNot) {
  if (whyNot != nullptr) whyNot->clear();
  return true;
}

DeviceFusedEngine::DeviceFusedEngine(const FusedOptions& options) : o_(options) {}

Result DeviceFusedEngine::init() {
  const int rank = o_.rank, dev = o_.cudaDevice;
  CudaDeviceGuard guard(dev);
  TSR_CHECK(TSR_CUDA_CHECK(guard.status(), rank, "making the fused executor's GPU current"));
  int major = 0, minor = 0;
  TSR_CHECK(TSR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
                           rank, "cudaDeviceGetAttribute"));
  TSR_CHECK(TSR_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev),
                           rank, "cudaDeviceGetAttribute"));
  if (major < 8)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: the fused GPU kernels need compute capability 8.0 or newer "
                    "(mma.sync on bf16, cp.async); CUDA device %d is %d.%d",
                    rank, dev, major, minor);
  TSR_CHECK(TSR_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev), rank,
                           "cudaDeviceGetAttribute"));
  TSR_CHECK(prepareGemmKernels(&gemmPerSm_));
  TSR_CHECK(gemmSm90For(dev, &sm90_));
  const bool sm90 = sm90_;
#if defined(TESSERA_FUSED_HAVE_SM90)
  if (sm90) {
    // Both GEMMs stay loaded (shapes past the sm90 one's TMA limits take the sm80 one), so the
    // grid size, which the deadlock rule derives from CTAs per SM, must suit both.
    int sm90PerSm = 0;
    TSR_CHECK(prepareGemmKernelsSm90(&sm90PerSm));
    gemmPerSm_ = std::min(gemmPerSm_, sm90PerSm);
  }
#endif
  TSR_INFO("rank %d: fused GEMM on CUDA device %d (%d.%d): %s, %d CTAs per SM", rank, dev, major,
           minor, sm90 ? "sm90 (TMA + wgmma)" : "sm80 (mma.sync)", gemmPerSm_);
  TSR_CHECK(prepareCommKernels());

  cudaStream_t side = nullptr;
  TSR_CHECK(TSR_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), rank,
                           "creating the fused executor's stream"));
  side_ = side;
  for (void** ev : {&fork_, &join_, &last_}) {
    cudaEvent_t e = nullptr;
    TSR_CHECK(TSR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), rank,
                             "creating the fused executor's events"));
    *ev = e;
  }
  const size_t controlBytes = 64 + sizeof(char*) * static_cast<size_t>(o_.nranks);
  void* control = nullptr;
  TSR_CHECK(TSR_CUDA_CHECK(cudaMalloc(&control, controlBytes), rank,
                           "allocating the fused executor's control words"));
  control_ = static_cast<FusedControl*>(control);
  peerTable_ = reinterpret_cast<char**>(static_cast<char*>(control) + 64);
  TSR_CHECK(
      TSR_CUDA_CHECK(cudaMemsetAsync(control, 0, controlBytes, side), rank, "cudaMemsetAsync"));
  TSR_CHECK(
      waitStream(side, Deadline::after(o_.timeoutSeconds), "zeroing the fused control words"));
  void* record = nullptr;
  TSR_CHECK(TSR_CUDA_CHECK(cudaHostAlloc(&record, sizeof(FusedErrorRecord), cudaHostAllocMapped),
                           rank, "allocating the fused executor's error record"));
  errorHost_ = static_cast<FusedErrorRecord*>(record);
  std::memset(record, 0, sizeof(FusedErrorRecord));
  void* recordDevice = nullptr;
  TSR_CHECK(TSR_CUDA_CHECK(cudaHostGetDevicePointer(&recordDevice, record, 0), rank,
                           "mapping the fused executor's error record"));
  errorDevice_ = static_cast<FusedErrorRecord*>(recordDevice);
  return tsrSuccess;
}

DeviceFusedEngine::~DeviceFusedEngine() {
  CudaDeviceGuard guard(o_.cudaDevice);
  bool idle = !lastRecorded_ || waitLastCall("destroying the fused executor") == tsrSuccess;
  // After a failure a peer's kernels may still be on their way into this workspace.
  // A call that failed half launched counts: its first kernels may have reached peers, whose
  // kernels then write here.
  if (broken_ != tsrSuccess && (calls_ > 0 || started_)) idle = false;
  // A peer's last write into this workspace in a call is its end-of-call signal of done[peer]:
  // once every peer's done word counts every call, no peer kernel touches the memory any more.
  if (idle && ws_ && calls_ > 0) {
    const int n = o_.nranks;
    std::vector<uint64_t> done(static_cast<size_t>(n));
    const Deadline deadline = Deadline::after(o_.timeoutSeconds);
    Backoff backoff;
    for (;;) {
      const char* src = static_cast<const char*>(ws_->data()) + layout_.done;
      if (cudaMemcpyAsync(done.data(), src, done.size() * 8, cudaMemcpyDeviceToHost,
                          asStream(side_)) != cudaSuccess ||
          waitStream(asStream(side_), deadline, "reading the fused done words") != tsrSuccess) {
        idle = false;
        break;
      }
      if (std::all_of(done.begin(), done.end(), [&](uint64_t d) { return d >= calls_; })) break;
      if (deadline.expired()) {
        idle = false;
        break;
      }
      backoff.pause();
    }
  }
  if (!idle) {
    // Never free memory a kernel (this rank's or a peer's) may still write.
    TSR_WARN(
        "rank %d: the fused GPU executor's kernels or its peers' did not finish; its device "
        "memory is left allocated",
        o_.rank);
    clearLastError();
    struct Leaked {
      std::shared_ptr<Memory> ws;
      std::vector<std::shared_ptr<RemoteMemory>> remote;
      std::vector<std::shared_ptr<Connection>> conns;
    };
    (void)new Leaked{std::move(ws_), std::move(remote_), std::move(conns_)};
    return;
  }
  release();
}

void DeviceFusedEngine::release() {
  remote_.clear();
  ws_.reset();
  conns_.clear();
  // cudaFree and cudaFreeHost wait for an idle device: held back while a resident grid of this
  // process (a collective engine's) runs on it (core/idle_release.hpp).
  releaseWhenIdle(o_.cudaDevice, [device = o_.cudaDevice, control = control_, record = errorHost_,
                                  fork = fork_, join = join_, last = last_, side = side_] {
    CudaDeviceGuard guard(device);
    if (control != nullptr) (void)cudaFree(control);
    if (record != nullptr) (void)cudaFreeHost(record);
    for (void* ev : {fork, join, last})
      if (ev != nullptr) (void)cudaEventDestroy(asEvent(ev));
    if (side != nullptr) (void)cudaStreamDestroy(asStream(side));
    (void)cudaGetLastError();
  });
  control_ = nullptr;
  errorHost_ = nullptr;
  side_ = fork_ = join_ = last_ = nullptr;
}

uint64_t DeviceFusedEngine::workspaceBytes() const { return ws_ ? ws_->size() : 0; }

Result DeviceFusedEngine::fail(Result code) {
  if (broken_ == tsrSuccess) {
    broken_ = code;
    brokenWhy_ = lastErrorMessage();
  }
  return code;
}

Result DeviceFusedEngine::healthy() {
  const uint32_t code = errorHost_ != nullptr ? device::loadAcquire32(&errorHost_->code) : 0u;
  if (broken_ == tsrSuccess && code == kFusedAborted) {
    broken_ = tsrRemoteError;
    brokenWhy_ = "rank " + std::to_string(o_.rank) +
                 ": the communicator was aborted; its fused GPU executor is unusable";
  } else if (broken_ == tsrSuccess && code != 0) {
    broken_ = tsrTimeout;
    brokenWhy_ = recordSentence(o_.rank, *errorHost_, o_.timeoutSeconds);
  }
  if (broken_ != tsrSuccess) return TSR_FAIL(broken_, "%s", brokenWhy_.c_str());
  return tsrSuccess;
}

Result DeviceFusedEngine::asyncError() {
  // Only the record: broken_ belongs to the thread that makes calls.
  const uint32_t code = errorHost_ != nullptr ? device::loadAcquire32(&errorHost_->code) : 0u;
  if (code == 0) return tsrSuccess;
  return code == kFusedAborted ? tsrRemoteError : tsrTimeout;
}

void DeviceFusedEngine::abort() {
  // The kernels' waits poll the record's code and give up once it is not 0. A kernel that records
  // a timeout at the same moment stores 1 over it: either way the waits stop and calls fail.
  if (errorHost_ == nullptr) return;
  (void)device::casU32(&errorHost_->code, 0, kFusedAborted);
}

Result DeviceFusedEngine::setup(const FusedCall& call, CallSetup* out) const {
  const char* api = fusedOpName(call.op);
  const FusedShape& s = call.shape;
  const int rank = o_.rank;
  if (cfg_.tileM != kDeviceTileM || cfg_.tileN != kDeviceTileN)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: %s: the fused GPU kernels are built for %u x %u GEMM tiles, not %u x "
                    "%u (TESSERA_FUSED_TILE_M / TESSERA_FUSED_TILE_N: unset them for device "
                    "buffers; TESSERA_FUSED_COMM_M / _N may take any value)",
                    rank, api, kDeviceTileM, kDeviceTileN, cfg_.tileM, cfg_.tileN);
  if (call.inType != tsrFloat16 && call.inType != tsrBfloat16)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: %s: the fused GPU kernels take float16 or bfloat16 A and B, not %s",
                    rank, api, dtypeName(call.inType));
  if (s.k % 8 != 0 || s.n % 8 != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: %s on device buffers: K=%llu and N=%llu must be multiples of 8 (the "
                    "GPU kernels load rows of A and B in 16-byte pieces); pad them with zeros",
                    rank, api, static_cast<unsigned long long>(s.k),
                    static_cast<unsigned long long>(s.n));
  if (addr(call.a) % 16 != 0 || addr(call.b) % 16 != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: %s on device buffers: A (%p) and B (%p) must be 16-byte aligned",
                    rank, api, call.a, call.b);
  const uint64_t outBytes = dtypeSize(call.outType);
  if (addr(call.c) % outBytes != 0 || addr(call.bias) % outBytes != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: %s: C (%p) and bias (%p) must be aligned to their %llu-byte elements",
                    rank, api, call.c, call.bias, static_cast<unsigned long long>(outBytes));
  const auto n = static_cast<uint32_t>(o_.nranks);
  out->sched = TileScheduler::make(call.op, static_cast<uint32_t>(rank), n, s.m, s.n, cfg_);
  if (out->sched.tilesPerSegment * n >= (uint64_t{1} << 31))
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: %s: M=%llu x N=%llu makes %llu GEMM tiles, more than the GPU kernels "
                    "index (2^31)",
                    rank, api, static_cast<unsigned long long>(s.m),
                    static_cast<unsigned long long>(s.n),
                    static_cast<unsigned long long>(out->sched.tilesPerSegment * n));
  // AllGather+GEMM: N_r may differ per rank; its layout does not depend on N (layout.hpp).
  const bool gather = call.op == FusedOp::kAllGatherGemm;
  out->layout = workspaceLayout(out->sched, s.k, static_cast<uint32_t>(dtypeSize(call.inType)),
                                static_cast<uint32_t>(outBytes), call.atomic, false);
  const TileConfig& c = out->sched.cfg;
  out->key = {static_cast<uint64_t>(call.op),
              n,
              s.m,
              gather ? s.k : s.n,
              static_cast<uint64_t>(call.inType),
              static_cast<uint64_t>(call.outType),
              call.atomic ? 1u : 0u,
              c.tileM,
              c.tileN,
              c.commM,
              c.commN,
              out->layout.total};
  return tsrSuccess;
}

Result DeviceFusedEngine::waitLastCall(const char* why) {
  const Deadline deadline = Deadline::after(o_.timeoutSeconds);
  Backoff backoff;
  for (;;) {
    cudaError_t e = cudaEventQuery(asEvent(last_));
    if (e == cudaSuccess) return tsrSuccess;
    if (e != cudaErrorNotReady) return TSR_CUDA_CHECK(e, o_.rank, why);
    if (deadline.expired())
      return TSR_FAIL(tsrTimeout,
                      "rank %d: %s: the previous fused call has not finished on the GPU after "
                      "%.3g s",
                      o_.rank, why, o_.timeoutSeconds);
    backoff.pause();
  }
}

Result DeviceFusedEngine::notCapturing(void* stream) const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TSR_CHECK(TSR_CUDA_CHECK(cudaStreamIsCapturing(asStream(stream), &status), o_.rank,
                           "cudaStreamIsCapturing"));
  if (status != cudaStreamCaptureStatusNone)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: fused calls on device buffers cannot be captured into a CUDA graph "
                    "yet (a layout change waits for the previous call through an event that a "
                    "replay does not record): make the call outside the capture",
                    o_.rank);
  return tsrSuccess;
}

Result DeviceFusedEngine::connectPeers() {
  if (connected_) return tsrSuccess;
  TransportContext& ctx = *o_.transports;
  const int n = o_.nranks;
  conns_.assign(static_cast<size_t>(n), nullptr);
  for (int p = 0; p < n; ++p)  // bootstrap sends never wait, so rank order cannot deadlock
    if (p != o_.rank) TSR_CHECK(ctx.connect(p, &conns_[static_cast<size_t>(p)], kDeviceFusedTag));
  // Ranks on this GPU (same UUID): they share its SMs (see the deadlock rule).
  cudaDeviceProp prop{};
  TSR_CHECK(TSR_CUDA_CHECK(cudaGetDeviceProperties(&prop, o_.cudaDevice), o_.rank,
                           "cudaGetDeviceProperties"));
  std::vector<std::array<char, 16>> ids(static_cast<size_t>(n));
  std::memcpy(ids[static_cast<size_t>(o_.rank)].data(), prop.uuid.bytes, 16);
  TSR_CHECK(ctx.bootstrap().allGather(ids.data(), 16));
  localRanks_ =
      static_cast<int>(std::count(ids.begin(), ids.end(), ids[static_cast<size_t>(o_.rank)]));
  // The tile counters take concurrent atomic adds from every producer, and atomic mode adds floats
  // into a peer's slot: between two GPUs that needs native peer atomics (NVLink; plain PCIe peer
  // access may drop them, and a wait would then run into its deadline).
  int devices = 0;
  TSR_CHECK(TSR_CUDA_CHECK(cudaGetDeviceCount(&devices), o_.rank, "cudaGetDeviceCount"));
  for (int p = 0; p < n; ++p) {
    const auto& id = ids[static_cast<size_t>(p)];
    if (id == ids[static_cast<size_t>(o_.rank)]) continue;
    for (int d = 0; d < devices; ++d) {
      cudaDeviceProp other{};
      if (cudaGetDeviceProperties(&other, d) != cudaSuccess ||
          std::memcmp(other.uuid.bytes, id.data(), 16) != 0)
        continue;
      int atomics = 0;
      TSR_CHECK(TSR_CUDA_CHECK(cudaDeviceGetP2PAttribute(
                                   &atomics, cudaDevP2PAttrNativeAtomicSupported, o_.cudaDevice, d),
                               o_.rank, "cudaDeviceGetP2PAttribute"));
      if (atomics == 0)
        return TSR_FAIL(tsrInvalidUsage,
                        "rank %d: the fused GPU kernels signal rank %d's GPU (CUDA device %d here) "
                        "with atomic adds, but this GPU pair has no native peer atomics (PCIe "
                        "without NVLink?)",
                        o_.rank, p, d);
    }
  }
  connected_ = true;
  return tsrSuccess;
}

Result DeviceFusedEngine::ensureLayout(const CallSetup& cs) {
  if (haveLayout_ && cs.key == key_) return tsrSuccess;
  Result r = lastRecorded_ ? waitLastCall("changing the fused workspace's layout") : tsrSuccess;
  if (r == tsrSuccess) r = connectPeers();
  if (r != tsrSuccess) return fail(r);
  // Every rank has finished its previous call once it gets past this allGather. A mismatch is
  // seen by every rank at once and changes nothing: the executors stay usable.
  struct Vote {
    DeviceLayoutKey key;
    uint64_t need;
  };
  const int n = o_.nranks, rank = o_.rank;
  std::vector<Vote> votes(static_cast<size_t>(n));
  votes[static_cast<size_t>(rank)] = {cs.key, !ws_ || ws_->size() < cs.layout.total ? 1u : 0u};
  r = o_.transports->bootstrap().allGather(votes.data(), sizeof(Vote));
  if (r != tsrSuccess) return fail(r);
  bool grow = false;
  for (int q = 0; q < n; ++q) {
    if (votes[static_cast<size_t>(q)].key != cs.key)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: its fused call (%s) differs from rank %d's in op, shape, types, "
                      "flags or tiles: every rank must make the same fused calls in the same order",
                      rank, fusedOpName(cs.sched.op), q);
    grow = grow || votes[static_cast<size_t>(q)].need != 0;
  }
  r = rebaseline(cs, grow);
  return r == tsrSuccess ? r : fail(r);
}

Result DeviceFusedEngine::rebaseline(const CallSetup& cs, bool grow) {
  TransportContext& ctx = *o_.transports;
  const int n = o_.nranks, rank = o_.rank;
  if (grow) {
    const uint64_t bytes = std::max<uint64_t>(cs.layout.total, ws_ ? ws_->size() : 0);
    remote_.clear();
    ws_.reset();
    TSR_CHECK(ctx.allocate(bytes, MemoryKind::kCuda, &ws_));
    remote_.assign(static_cast<size_t>(n), nullptr);
    peerWs_.assign(static_cast<size_t>(n), nullptr);
    peerWs_[static_cast<size_t>(rank)] = static_cast<char*>(ws_->data());
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      const auto i = static_cast<size_t>(p);
      TSR_CHECK(ctx.exchangeMemory(*conns_[i], *ws_, &remote_[i], kDeviceFusedTag));
      if (remote_[i]->mapped() == nullptr)
        return TSR_FAIL(tsrInvalidUsage,
                        "rank %d: the fused GPU kernels store into every peer's workspace "
                        "directly, but rank %d is reached over %s, which does not map its device "
                        "memory (the fused GPU path needs p2p or cuda_ipc to every peer)",
                        rank, p, transportName(conns_[i]->kind()));
      peerWs_[i] = static_cast<char*>(remote_[i]->mapped());
    }
    TSR_CHECK(
        TSR_CUDA_CHECK(cudaMemcpyAsync(peerTable_, peerWs_.data(), sizeof(char*) * peerWs_.size(),
                                       cudaMemcpyHostToDevice, asStream(side_)),
                       rank, "uploading the fused peer table"));
  }
  TSR_CHECK(TSR_CUDA_CHECK(cudaMemsetAsync(ws_->data(), 0, ws_->size(), asStream(side_)), rank,
                           "zeroing the fused workspace"));
  TSR_CHECK(
      TSR_CUDA_CHECK(cudaMemsetAsync(&control_->callIndex, 0, sizeof(uint64_t), asStream(side_)),
                     rank, "zeroing the fused call index"));
  TSR_CHECK(waitStream(asStream(side_), Deadline::after(o_.timeoutSeconds),
                       "setting up the fused workspace"));
  // No peer writes into the zeroed workspace before every rank zeroed its own.
  TSR_CHECK(ctx.bootstrap().barrier());
  key_ = cs.key;
  layout_ = cs.layout;
  haveLayout_ = true;
  calls_ = 0;
  TSR_INFO("rank %d: fused %s workspace of %llu bytes, %d ranks on this GPU", rank,
           fusedOpName(cs.sched.op), static_cast<unsigned long long>(ws_->size()), localRanks_);
  return tsrSuccess;
}

Result DeviceFusedEngine::enqueue(const FusedCall& call, void* stream) {
  CallSetup cs{};
  TSR_CHECK(prepareCall(call, stream, &cs));
  CudaDeviceGuard guard(o_.cudaDevice);
  TSR_CHECK(TSR_CUDA_CHECK(guard.status(), o_.rank, "making the fused executor's GPU current"));
  started_ = true;
  Result r = call.op == FusedOp::kAllGatherGemm ? launchAllGatherCall(call, cs, stream)
                                                : launchReduceCall(call, cs, stream);
  if (r == tsrSuccess)
    r = TSR_CUDA_CHECK(cudaEventRecord(asEvent(last_), asStream(stream)), o_.rank,
                       "recording the fused call's end");
  // A call half launched leaves the peers waiting for its signals: no later call can agree.
  if (r != tsrSuccess) return fail(r);
  lastRecorded_ = true;
  ++calls_;
  return tsrSuccess;
}

Result DeviceFusedEngine::reserve(const FusedCall& call, void* stream) {
  CallSetup cs{};
  return prepareCall(call, stream, &cs);
}

Result DeviceFusedEngine::prepareCall(const FusedCall& call, void* stream, CallSetup* cs) {
  TSR_CHECK(healthy());
  TSR_CHECK(setup(call, cs));
  CudaDeviceGuard guard(o_.cudaDevice);
  TSR_CHECK(TSR_CUDA_CHECK(guard.status(), o_.rank, "making the fused executor's GPU current"));
  TSR_CHECK(notCapturing(stream));
  return ensureLayout(*cs);
}

}  // namespace tessera::fused
