// The device executor's executing side on a GPU (executing_side.hpp): the queue in device memory
// and mapped pinned host memory, the resident kernel on a non-blocking stream of its own, calls
// posted in stream order by a trigger kernel (or, in launch mode, run by an item kernel), graph
// call sites, and the order of calls made on different streams. Without CUDA, makeCudaSide says
// so and nothing else here is built.
#include "collectives/exec/device/executing_side.hpp"
#include "core/build_config.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstring>
#include <thread>
#include <vector>

#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/stream_ops.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_stream.hpp"
#include "core/cuda/device_guard.hpp"
#include "core/idle_release.hpp"
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}  // namespace

#if TESSERA_HAVE_CUDA

namespace {
constexpr size_t kSiteWordsPerChunk = 1024;

class GuardScope final : public SideScope {
 public:
  explicit GuardScope(int device) : guard_(device) {}

 private:
  CudaDeviceGuard guard_;
};

class CudaSide final : public ExecutingSide {
 public:
  CudaSide(const DeviceExecutorOptions& options, HostQueue& hq) : o_(options), hq_(hq) {}

  std::unique_ptr<SideScope> enter() override {
    return std::make_unique<GuardScope>(o_.cudaDevice);
  }

  Result allocateQueue(size_t deviceBytes, size_t hostBytes, char** dev, char** shared) override {
    const int rank = o_.rank;
    CudaDeviceGuard guard(o_.cudaDevice);
    // Streams first: every memory operation of the executor goes on its own non-blocking control
    // stream. The legacy default stream waits for every blocking stream of the process, and with
    // thread ranks sharing a GPU one of those may wait on a call that needs this very thread (a
    // peer's bind in progress): cudaMemcpy / cudaMemset there could deadlock.
    cudaStream_t st = nullptr, ctl = nullptr;
    TSR_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), rank);
    stream_ = st;
    TSR_CUDA(cudaStreamCreateWithFlags(&ctl, cudaStreamNonBlocking), rank);
    control_ = ctl;
    TSR_CUDA(cudaMalloc(&deviceBlock_, deviceBytes), rank);
    TSR_CUDA(cudaMemsetAsync(deviceBlock_, 0, deviceBytes, ctl), rank);
    // Call-site words for graph capture, made now: nothing may allocate or set memory while a
    // stream is being captured.
    TSR_CHECK(addSiteChunk());
    TSR_CUDA(cudaHostAlloc(&pinned_, hostBytes, cudaHostAllocMapped), rank);
    std::memset(pinned_, 0, hostBytes);
    void* mappedDev = nullptr;
    TSR_CUDA(cudaHostGetDevicePointer(&mappedDev, pinned_, 0), rank);
    // With unified addressing (every 64-bit platform CUDA supports) the device pointer of mapped
    // pinned memory is its host pointer, so the host reads the record and writes the flags at
    // the same addresses the kernels use.
    if (mappedDev != pinned_)
      return TSR_FAIL(tsrSystemError,
                      "rank %d: mapped pinned memory has a device address other "
                      "than its host address (no unified addressing)",
                      rank);
    *dev = static_cast<char*>(deviceBlock_);
    *shared = static_cast<char*>(pinned_);
    return tsrSuccess;
  }

  Result startResident() override {
    CudaDeviceGuard guard(o_.cudaDevice);
    TSR_CHECK(exec::preloadDeviceKernels());
    // Refused with a sentence rather than met as a grid barrier's deadline: the grids of this
    // process on the GPU (this one was counted before the launch) must all be resident at once.
    int perSm = 0, sms = 0;
    TSR_CHECK(exec::residentKernelOccupancy(o_.cudaDevice, static_cast<uint32_t>(o_.threads),
                                            &perSm, &sms));
    const int all = residentGridCtas(o_.cudaDevice);
    TSR_CHECK(
        residentGridFits(o_.rank, o_.cudaDevice, o_.ctas, all - o_.ctas, sms, perSm, o_.threads));
    if (o_.gpuRanksElsewhere > 0 &&
        static_cast<int64_t>(all) + static_cast<int64_t>(o_.gpuRanksElsewhere) * o_.ctas >
            static_cast<int64_t>(sms) * perSm)
      TSR_WARN(
          "rank %d: %d ranks of other processes share device %d; their resident grids and "
          "this process's (%d CTAs) exceed its %d resident CTAs, which matters under MPS "
          "(without it the processes time-slice)",
          o_.rank, o_.gpuRanksElsewhere, o_.cudaDevice, all, sms * perSm);
    return exec::launchResident(hq_.q, 0, static_cast<uint32_t>(o_.ctas),
                                static_cast<uint32_t>(o_.threads), stream_);
  }

  bool gridEnded() override {
    return stream_ == nullptr || cudaStreamQuery(asStream(stream_)) != cudaErrorNotReady;
  }

  void postStop() override {
    // The stop goes on the control stream, which is not ordered with the callers' streams: let
    // the eager calls already enqueued complete first (bounded; a failed or aborted queue
    // completes them at once).
    auto t0 = std::chrono::steady_clock::now();
    while (static_cast<int32_t>(exec::loadAcquire32(hq_.eagerWord) - hq_.ticket) < 0 &&
           secondsSince(t0) < o_.timeoutSeconds)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    exec::WorkItem stop{};
    stop.kind = exec::kItemStop;
    if (exec::launchTrigger(hq_.q, stop, false, control_) != tsrSuccess) clearLastError();
  }

  void abandon() override {}

  void quiesce() override {
    if (stream_) (void)cudaStreamSynchronize(asStream(stream_));
    if (control_) (void)cudaStreamSynchronize(asStream(control_));
  }

  void release() override {
    // cudaFree and cudaFreeHost wait for an idle device: held back while any resident grid of
    // this process runs on it (idle_release.hpp). The lambda owns copies: the executor is gone
    // by the time it runs.
    releaseWhenIdle(o_.cudaDevice,
                    [device = o_.cudaDevice, chunks = std::move(siteChunks_), block = deviceBlock_,
                     pinned = pinned_, stream = stream_, control = control_, order = order_] {
                      CudaDeviceGuard guard(device);
                      for (void* p : chunks) (void)cudaFree(p);
                      if (block) (void)cudaFree(block);
                      if (pinned) (void)cudaFreeHost(pinned);
                      if (stream) (void)cudaStreamDestroy(asStream(stream));
                      if (control) (void)cudaStreamDestroy(asStream(control));
                      if (order) (void)cudaEventDestroy(asEvent(order));
                      (void)cudaGetLastError();
                    });
    siteChunks_.clear();
    deviceBlock_ = pinned_ = stream_ = control_ = order_ = nullptr;
  }

  Result upload(void* dst, const void* src, size_t bytes) override {
    CudaDeviceGuard guard(o_.cudaDevice);
    auto ctl = asStream(control_);  // never the legacy stream (allocateQueue)
    if (src == nullptr)
      TSR_CUDA(cudaMemsetAsync(dst, 0, bytes, ctl), o_.rank);
    else
      TSR_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctl), o_.rank);
    TSR_CUDA(cudaStreamSynchronize(ctl), o_.rank);
    return tsrSuccess;
  }

  Result post(exec::WorkItem item, void* stream, const exec::P2PGroupDesc* group,
              exec::P2PGroupDesc* groups) override;

  Result capturing(void* stream, bool* out) override {
    return exec::streamIsCapturing(stream, out);
  }

  Result ownFailure(std::string* why) override {
    if (stream_ == nullptr) return tsrSuccess;
    cudaError_t ce = cudaStreamQuery(asStream(stream_));
    if (ce == cudaSuccess || ce == cudaErrorNotReady) return tsrSuccess;
    *why = strprintf("rank %d: the resident kernel failed: %s", o_.rank, cudaGetErrorString(ce));
    return tsrUnhandledCudaError;
  }

 private:
  // One more chunk of zeroed call-site words (outside any capture).
  Result addSiteChunk() {
    void* chunk = nullptr;
    auto ctl = asStream(control_);
    TSR_CUDA(cudaMalloc(&chunk, kSiteWordsPerChunk * sizeof(uint32_t)), o_.rank);
    siteChunks_.push_back(chunk);
    TSR_CUDA(cudaMemsetAsync(chunk, 0, kSiteWordsPerChunk * sizeof(uint32_t), ctl), o_.rank);
    TSR_CUDA(cudaStreamSynchronize(ctl), o_.rank);
    return tsrSuccess;
  }

  // Calls of one communicator run in the order they were made, as in NCCL: a call on another
  // stream than the last one waits for the last one's stream to get there (its trigger claims
  // the next queue slot only after the earlier trigger did; in launch mode the grids share the
  // queue's barrier and the plans' counters and must not overlap).
  Result orderAfterLast(void* stream) {
    if (haveLast_ && lastStream_ != stream) {
      if (order_ == nullptr) {
        cudaEvent_t ev = nullptr;
        TSR_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), o_.rank);
        order_ = ev;
      }
      auto ev = asEvent(order_);
      // The last stream may have been destroyed since (its work still runs): then there is
      // nothing to record on, and the order is the caller's.
      if (cudaEventRecord(ev, asStream(lastStream_)) == cudaSuccess)
        TSR_CUDA(cudaStreamWaitEvent(asStream(stream), ev, 0), o_.rank);
      else
        (void)cudaGetLastError();
    }
    lastStream_ = stream;
    haveLast_ = true;
    return tsrSuccess;
  }

  const DeviceExecutorOptions& o_;
  HostQueue& hq_;
  void* deviceBlock_ = nullptr;  // the queue block
  void* pinned_ = nullptr;       // the error record and flags (mapped pinned host memory)
  void* stream_ = nullptr;       // the resident kernel's
  void* control_ = nullptr;      // the stop trigger's (the resident stream is busy until the stop)
  // The stream of the last eager call, and an event to order the next call's stream after it.
  void* lastStream_ = nullptr;
  bool haveLast_ = false;
  void* order_ = nullptr;
  std::vector<void*> siteChunks_;
  size_t sitesUsed_ = 0;
};

Result CudaSide::post(exec::WorkItem item, void* stream, const exec::P2PGroupDesc* group,
                      exec::P2PGroupDesc* groups) {
  CudaDeviceGuard guard(o_.cudaDevice);
  const exec::WorkQueueHandle& q = hq_.q;
  bool capturing = false;
  TSR_CHECK(exec::streamIsCapturing(stream, &capturing));
  if (!capturing) TSR_CHECK(orderAfterLast(stream));
  if (o_.mode == LaunchMode::kKernel) {
    item.doneWord = nullptr;  // stream order is the launch's own
    const auto nctas = static_cast<uint32_t>(o_.ctas);
    const auto threads = static_cast<uint32_t>(o_.threads);
    if (group != nullptr) return exec::launchSendRecvItem(q, item, *group, nctas, threads, stream);
    return exec::launchItem(q, item, nctas, threads, stream);
  }
  auto trigger = [&](bool resetDone) {
    if (group != nullptr)
      return exec::launchSendRecvTrigger(q, item, groups, *group, resetDone, stream);
    return exec::launchTrigger(q, item, resetDone, stream);
  };
  if (capturing) {
    // A call site of its own, never reused: every replay resets it, runs, and waits for its run.
    // The words were made before any capture (allocateQueue, and grown below outside captures).
    if (sitesUsed_ == siteChunks_.size() * kSiteWordsPerChunk)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: more than %zu device collectives were captured into graphs; make "
                      "one eager device call between captures so more call sites are made",
                      o_.rank, sitesUsed_);
    uint32_t* word = static_cast<uint32_t*>(siteChunks_[sitesUsed_ / kSiteWordsPerChunk]) +
                     sitesUsed_ % kSiteWordsPerChunk;
    ++sitesUsed_;
    item.doneWord = word;
    item.doneValue = 1;
    TSR_CHECK(trigger(true));
    return exec::streamWaitValue32(stream, word, 1, false);
  }
  // Outside a capture: room for the next captures (a capture cannot allocate).
  if (sitesUsed_ + kSiteWordsPerChunk / 4 > siteChunks_.size() * kSiteWordsPerChunk)
    TSR_CHECK(addSiteChunk());
  item.doneWord = hq_.eagerWord;
  item.doneValue = ++hq_.ticket;
  TSR_CHECK(trigger(false));
  return exec::streamWaitValue32(stream, hq_.eagerWord, item.doneValue, true);
}

}  // namespace

Result makeCudaSide(const DeviceExecutorOptions& options, HostQueue& hq,
                    std::unique_ptr<ExecutingSide>* out) {
  *out = std::make_unique<CudaSide>(options, hq);
  return tsrSuccess;
}

#else

Result makeCudaSide(const DeviceExecutorOptions& options, HostQueue&,
                    std::unique_ptr<ExecutingSide>* out) {
  out->reset();
  return TSR_FAIL(tsrInvalidUsage,
                  "rank %d: the device executor needs CUDA, and this build has none (use the "
                  "emulation or host buffers)",
                  options.rank);
}

#endif

}  // namespace tessera
