// The device executor's host side (device_executor.hpp): the work queue's memory, the resident
// grid (a persistent kernel on a GPU, host threads in the emulation), posting calls in stream order
// with their done words, errors, abort, and a shutdown that never hangs.
#include "collectives/exec/device/device_executor.hpp"

#include <atomic>
#include <chrono>
#include <cstring>

#include "collectives/exec/device/item_runner.hpp"
#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/stream_ops.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "core/build_config.hpp"
#include "core/datatype.hpp"
#include "core/reduce_op.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr size_t kSiteWordsPerChunk = 1024;

// Where each word of the queue lies inside its block (items first: they are the big part).
struct QueueLayout {
  size_t items = 0, posted, consumed, grid, deviceBytes;  // device (or host) block
  // Host-visible block. The eager done word is here so that the host can see how far the calls
  // got (shutdown) and complete stranded waits itself.
  size_t error = 0, abortFlag, stopFlag, eager, hostBytes;
  explicit QueueLayout(uint32_t slots) {
    posted = slots * sizeof(exec::WorkItem);
    consumed = posted + 8;
    grid = consumed + 8;
    deviceBytes = grid + sizeof(exec::GridSync);
    abortFlag = sizeof(exec::ErrorRecord);
    stopFlag = abortFlag + 8;
    eager = stopFlag + 8;
    hostBytes = eager + 8;
  }
};

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

#if TESSERA_HAVE_CUDA
Result cudaFail(cudaError_t e, const char* what, int rank) {
  return TSR_FAIL(tsrUnhandledCudaError, "rank %d: %s failed: %s", rank, what,
                  cudaGetErrorString(e));
}
#define TSR_CUDA(call, rank)                                 \
  do {                                                       \
    cudaError_t e_ = (call);                                 \
    if (e_ != cudaSuccess) return cudaFail(e_, #call, rank); \
  } while (0)

// Makes the executor's GPU current for a scope, and restores the caller's.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) (void)cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_)
      (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};
#endif

}  // namespace

struct DeviceExecutor::State {
  exec::WorkQueueHandle q{};
  uint32_t* eagerWord = nullptr;
  uint32_t ticket = 0;  // the last eager call's done value
  // Emulation: plain host memory; the resident CTAs as threads.
  std::unique_ptr<uint64_t[]> hostDevice, hostShared;
  std::vector<std::thread> threads;
  std::atomic<int> threadsDone{0};
  // GPU: the queue block (device), the error record and flags (mapped pinned host), call sites.
  void* deviceBlock = nullptr;
  void* pinned = nullptr;
  void* stream = nullptr;   // the resident kernel's
  void* control = nullptr;  // the stop trigger's (the resident stream is busy until the stop)
  bool resident = false;
  // The stream of the last eager call, and an event to order the next call's stream after it.
  void* lastStream = nullptr;
  bool haveLast = false;
  void* order = nullptr;
  std::vector<void*> siteChunks;
  size_t sitesUsed = 0;
  std::map<const Plan*, std::unique_ptr<DeviceBoundPlan>> plans;
  std::vector<std::shared_ptr<Connection>> connections;  // by peer
  uint64_t lastCall = 0;
  Result failed = tsrSuccess;
  std::string failedWhy;
};

DeviceExecutor::DeviceExecutor(const DeviceExecutorOptions& options)
    : options_(options), state_(std::make_unique<State>()) {}

Result DeviceExecutor::create(const DeviceExecutorOptions& options,
                              std::unique_ptr<DeviceExecutor>* out) {
  if (options.engine == nullptr || options.transports == nullptr || options.ctas < 1 ||
      options.queueSlots < 2)
    return TSR_FAIL(tsrInvalidArgument,
                    "DeviceExecutor needs an engine, transports, ctas >= 1 and queueSlots >= 2");
  std::unique_ptr<DeviceExecutor> ex(new DeviceExecutor(options));
  State& s = *ex->state_;
  QueueLayout L(options.queueSlots);
  char* dev = nullptr;
  char* shared = nullptr;
  if (ex->emulated()) {
    s.hostDevice.reset(new uint64_t[L.deviceBytes / 8]());
    s.hostShared.reset(new uint64_t[L.hostBytes / 8]());
    dev = reinterpret_cast<char*>(s.hostDevice.get());
    shared = reinterpret_cast<char*>(s.hostShared.get());
  } else {
#if TESSERA_HAVE_CUDA
    const int rank = options.rank;
    DeviceScope scope(options.cudaDevice);
    // Streams first: every memory operation of the executor goes on its own non-blocking control
    // stream. The legacy default stream waits for every blocking stream of the process, and with
    // thread ranks sharing a GPU one of those may wait on a call that needs this very thread (a
    // peer's bind in progress): cudaMemcpy / cudaMemset there could deadlock.
    cudaStream_t st = nullptr, ctl = nullptr;
    TSR_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), rank);
    s.stream = st;
    TSR_CUDA(cudaStreamCreateWithFlags(&ctl, cudaStreamNonBlocking), rank);
    s.control = ctl;
    TSR_CUDA(cudaMalloc(&s.deviceBlock, L.deviceBytes), rank);
    TSR_CUDA(cudaMemsetAsync(s.deviceBlock, 0, L.deviceBytes, ctl), rank);
    // Call-site words for graph capture, made now: nothing may allocate or set memory while a
    // stream is being captured.
    void* chunk = nullptr;
    TSR_CUDA(cudaMalloc(&chunk, kSiteWordsPerChunk * sizeof(uint32_t)), rank);
    s.siteChunks.push_back(chunk);
    TSR_CUDA(cudaMemsetAsync(chunk, 0, kSiteWordsPerChunk * sizeof(uint32_t), ctl), rank);
    TSR_CUDA(cudaStreamSynchronize(ctl), rank);
    TSR_CUDA(cudaHostAlloc(&s.pinned, L.hostBytes, cudaHostAllocMapped), rank);
    std::memset(s.pinned, 0, L.hostBytes);
    void* mappedDev = nullptr;
    TSR_CUDA(cudaHostGetDevicePointer(&mappedDev, s.pinned, 0), rank);
    // With unified addressing (every 64-bit platform CUDA supports) the device pointer of mapped
    // pinned memory is its host pointer, so the host reads the record and writes the flags at
    // the same addresses the kernels use.
    if (mappedDev != s.pinned)
      return TSR_FAIL(tsrSystemError,
                      "rank %d: mapped pinned memory has a device address other "
                      "than its host address (no unified addressing)",
                      rank);
    dev = static_cast<char*>(s.deviceBlock);
    shared = static_cast<char*>(s.pinned);
#else
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: the device executor needs CUDA, and this build has none (use the "
                    "emulation or host buffers)",
                    options.rank);
#endif
  }
  s.q.items = reinterpret_cast<exec::WorkItem*>(dev + L.items);
  s.q.posted = reinterpret_cast<uint64_t*>(dev + L.posted);
  s.q.consumed = reinterpret_cast<uint64_t*>(dev + L.consumed);
  s.q.grid = reinterpret_cast<exec::GridSync*>(dev + L.grid);
  s.eagerWord = reinterpret_cast<uint32_t*>(shared + L.eager);
  s.q.error = reinterpret_cast<exec::ErrorRecord*>(shared + L.error);
  s.q.abortFlag = reinterpret_cast<uint32_t*>(shared + L.abortFlag);
  s.q.stopFlag = reinterpret_cast<uint32_t*>(shared + L.stopFlag);
  s.q.size = options.queueSlots;
  s.q.timeoutNs = static_cast<uint64_t>(options.timeoutSeconds * 1e9);
  if (options.mode == LaunchMode::kPersistent) {
    if (ex->emulated()) {
      s.resident = true;
      for (int c = 0; c < options.ctas; ++c)
        s.threads.emplace_back([&s, c, n = options.ctas] {
          exec::DeviceItemRunner<exec::HostGroup> runner{s.q};
          exec::runScheduler(s.q, exec::HostGroup{}, static_cast<uint32_t>(c),
                             static_cast<uint32_t>(n), 0, runner);
          s.threadsDone.fetch_add(1, std::memory_order_release);
        });
    } else {
#if TESSERA_HAVE_CUDA
      DeviceScope scope(options.cudaDevice);
      TSR_CHECK(exec::preloadDeviceKernels());
      TSR_CHECK(exec::launchResident(s.q, 0, static_cast<uint32_t>(options.ctas),
                                     static_cast<uint32_t>(options.threads), s.stream));
      s.resident = true;
#endif
    }
  }
  TSR_INFO("rank %d: device executor %s, %s mode, %d CTAs", options.rank,
           ex->emulated() ? "emulated on host threads" : "on the GPU",
           options.mode == LaunchMode::kPersistent ? "persistent" : "launch", options.ctas);
  *out = std::move(ex);
  return tsrSuccess;
}

DeviceExecutor::~DeviceExecutor() {
  State& s = *state_;
  const bool emu = emulated();
#if TESSERA_HAVE_CUDA
  std::unique_ptr<DeviceScope> scope;
  if (!emu) scope = std::make_unique<DeviceScope>(options_.cudaDevice);
#endif
  // Whether the resident grid ended within `seconds`.
  auto gridEnded = [&s](bool emulated, double seconds) {
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      bool ended = true;
      if (emulated) {
        ended = s.threadsDone.load(std::memory_order_acquire) == static_cast<int>(s.threads.size());
      } else {
#if TESSERA_HAVE_CUDA
        ended = cudaStreamQuery(static_cast<cudaStream_t>(s.stream)) != cudaErrorNotReady;
#endif
      }
      if (ended) return true;
      if (secondsSince(t0) > seconds) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  bool ended = true;
  if (s.resident && !emu) {
    // The stop goes on the control stream, which is not ordered with the callers' streams: let
    // the eager calls already enqueued complete first (bounded; a failed or aborted queue
    // completes them at once).
    auto t0 = std::chrono::steady_clock::now();
    while (static_cast<int32_t>(exec::loadAcquire32(s.eagerWord) - s.ticket) < 0 &&
           secondsSince(t0) < options_.timeoutSeconds)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (s.resident) {
    exec::WorkItem stop{};
    stop.kind = exec::kItemStop;
    if (emu) {
      (void)exec::postItem(s.q, stop);
    } else if (exec::launchTrigger(s.q, stop, false, s.control) != tsrSuccess) {
      clearLastError();
    }
    const double t = options_.timeoutSeconds;
    ended = gridEnded(emu, t);
    if (!ended) {  // a call still runs: leave once idle, then give up the waits
      TSR_WARN("rank %d: the device executor did not stop within %.3g s; raising stop and abort",
               options_.rank, t);
      exec::storeRelease32(s.q.stopFlag, 1);
      ended = gridEnded(emu, 0.1 * t + 0.05);
      if (!ended) {
        exec::storeRelease32(s.q.abortFlag, 1);
        ended = gridEnded(emu, t);
      }
    }
  }
  // Calls whose trigger ran after the grid left are never run: release their streams (their
  // results are not there; the communicator's error says why, or destroy was early).
  exec::storeRelease32(s.eagerWord, s.ticket);
  if (!ended) {
    // Never hang: the executing side keeps the memory it may still touch.
    TSR_WARN(
        "rank %d: the device executor's resident grid did not end after abort; its memory "
        "is leaked",
        options_.rank);
    for (std::thread& th : s.threads) th.detach();
    (void)state_.release();
    return;
  }
  for (std::thread& th : s.threads) th.join();
#if TESSERA_HAVE_CUDA
  if (!emu) {
    if (s.stream) (void)cudaStreamSynchronize(static_cast<cudaStream_t>(s.stream));
    if (s.control) (void)cudaStreamSynchronize(static_cast<cudaStream_t>(s.control));
    s.plans.clear();  // device memory of the plans, while the GPU is current
    for (void* p : s.siteChunks) (void)cudaFree(p);
    if (s.deviceBlock) (void)cudaFree(s.deviceBlock);
    if (s.pinned) (void)cudaFreeHost(s.pinned);
    if (s.stream) (void)cudaStreamDestroy(static_cast<cudaStream_t>(s.stream));
    if (s.control) (void)cudaStreamDestroy(static_cast<cudaStream_t>(s.control));
    if (s.order) (void)cudaEventDestroy(static_cast<cudaEvent_t>(s.order));
  }
#endif
}

Result DeviceExecutor::connection(int peer, std::shared_ptr<Connection>* out) {
  State& s = *state_;
  if (peer < 0 || peer >= options_.nranks || peer == options_.rank)
    return TSR_FAIL(tsrInternalError, "rank %d: no device connection to rank %d", options_.rank,
                    peer);
  if (s.connections.empty()) s.connections.resize(static_cast<size_t>(options_.nranks));
  auto& slot = s.connections[static_cast<size_t>(peer)];
  if (!slot) {
    TransportKind kind;
    std::string why;
    TSR_CHECK(options_.transports->selectTransport(peer, &kind, &why));
    // The emulation reaches peers as the host engine does; a GPU through the device kinds.
    if (emulated()) kind = hostTransportKind(kind);
    TSR_CHECK(options_.transports->connect(peer, kind, &slot, kDeviceTransportTag));
  }
  *out = slot;
  return tsrSuccess;
}

Result DeviceExecutor::allocate(size_t bytes, std::shared_ptr<Memory>* out) {
#if TESSERA_HAVE_CUDA
  std::unique_ptr<DeviceScope> scope;
  if (!emulated()) scope = std::make_unique<DeviceScope>(options_.cudaDevice);
#endif
  TSR_CHECK(options_.transports->allocate(bytes, emulated() ? MemoryKind::kHost : MemoryKind::kCuda,
                                          out));
  return upload((*out)->data(), nullptr, bytes);  // zeroed: scratch and images start clean
}

Result DeviceExecutor::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return tsrSuccess;
  if (emulated()) {
    if (src == nullptr)
      std::memset(dst, 0, bytes);
    else
      std::memcpy(dst, src, bytes);
    return tsrSuccess;
  }
#if TESSERA_HAVE_CUDA
  DeviceScope scope(options_.cudaDevice);
  auto ctl = static_cast<cudaStream_t>(state_->control);  // never the legacy stream (create())
  if (src == nullptr)
    TSR_CUDA(cudaMemsetAsync(dst, 0, bytes, ctl), options_.rank);
  else
    TSR_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctl), options_.rank);
  TSR_CUDA(cudaStreamSynchronize(ctl), options_.rank);
  return tsrSuccess;
#else
  (void)src;
  return TSR_FAIL(tsrInternalError, "rank %d: upload without CUDA", options_.rank);
#endif
}

Result DeviceExecutor::post(exec::WorkItem item, void* stream, const exec::P2PGroupDesc* group,
                            exec::P2PGroupDesc* groups) {
  State& s = *state_;
  if (group != nullptr && groups == nullptr && options_.mode == LaunchMode::kPersistent)
    return TSR_FAIL(tsrInternalError, "rank %d: a send/recv group posted without a group ring",
                    options_.rank);
  if (emulated()) {
    item.doneWord = s.eagerWord;
    item.doneValue = ++s.ticket;
    if (options_.mode == LaunchMode::kPersistent) {
      // A failure is recorded and the done word written.
      (void)exec::postItem(s.q, item, groups, group);
      return tsrSuccess;
    }
    if (group != nullptr) item.p2p = group;  // the threads below run it before post returns
    // Launch mode: a fresh "grid" of host threads runs the item and ends, as launchItem's kernel.
    const auto n = static_cast<uint32_t>(options_.ctas);
    const uint64_t seq = s.lastCall;
    std::vector<std::thread> grid;
    for (uint32_t c = 0; c < n; ++c)
      grid.emplace_back([&s, &item, c, n, seq] {
        exec::HostGroup g;
        exec::DeviceItemRunner<exec::HostGroup> runner{s.q};
        bool ok = !exec::queueFailed(s.q);
        if (ok) ok = runner.runItem(item, g, c, n);
        if (ok) ok = exec::gridBarrier(s.q, g, n, seq, item.callNo, static_cast<int32_t>(c));
        if (!ok && device::loadAcquire(&s.q.error->code) == 0)
          exec::recordError(
              s.q, tsrRemoteError,
              exec::loadAcquire32(s.q.abortFlag) ? exec::kWhyAbort : exec::kWhyEarlier, seq,
              item.callNo, static_cast<int32_t>(c), -1, -1, -1);
      });
    for (std::thread& th : grid) th.join();
    exec::storeRelease32(item.doneWord, item.doneValue);
    return tsrSuccess;
  }
#if TESSERA_HAVE_CUDA
  DeviceScope scope(options_.cudaDevice);
  bool capturing = false;
  TSR_CHECK(exec::streamIsCapturing(stream, &capturing));
  if (!capturing) {
    // Calls of one communicator run in the order they were made, as in NCCL: a call on another
    // stream than the last one waits for the last one's stream to get there (its trigger claims
    // the next queue slot only after the earlier trigger did; in launch mode the grids share the
    // queue's barrier and the plans' counters and must not overlap).
    if (s.haveLast && s.lastStream != stream) {
      if (s.order == nullptr) {
        cudaEvent_t ev = nullptr;
        TSR_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), options_.rank);
        s.order = ev;
      }
      auto ev = static_cast<cudaEvent_t>(s.order);
      // The last stream may have been destroyed since (its work still runs): then there is
      // nothing to record on, and the order is the caller's.
      if (cudaEventRecord(ev, static_cast<cudaStream_t>(s.lastStream)) == cudaSuccess)
        TSR_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ev, 0), options_.rank);
      else
        (void)cudaGetLastError();
    }
    s.lastStream = stream;
    s.haveLast = true;
  }
  if (options_.mode == LaunchMode::kKernel) {
    item.doneWord = nullptr;  // stream order is the launch's own
    const auto nctas = static_cast<uint32_t>(options_.ctas);
    const auto threads = static_cast<uint32_t>(options_.threads);
    if (group != nullptr)
      return exec::launchSendRecvItem(s.q, item, *group, nctas, threads, stream);
    return exec::launchItem(s.q, item, nctas, threads, stream);
  }
  auto trigger = [&](bool resetDone) {
    if (group != nullptr)
      return exec::launchSendRecvTrigger(s.q, item, groups, *group, resetDone, stream);
    return exec::launchTrigger(s.q, item, resetDone, stream);
  };
  if (capturing) {
    // A call site of its own, never reused: every replay resets it, runs, and waits for its run.
    // The words were made before any capture (create(), and grown below outside captures).
    if (s.sitesUsed == s.siteChunks.size() * kSiteWordsPerChunk)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: more than %zu device collectives were captured into graphs; make "
                      "one eager device call between captures so more call sites are made",
                      options_.rank, s.sitesUsed);
    uint32_t* word = static_cast<uint32_t*>(s.siteChunks[s.sitesUsed / kSiteWordsPerChunk]) +
                     s.sitesUsed % kSiteWordsPerChunk;
    ++s.sitesUsed;
    item.doneWord = word;
    item.doneValue = 1;
    TSR_CHECK(trigger(true));
    return exec::streamWaitValue32(stream, word, 1, false);
  }
  if (s.sitesUsed + kSiteWordsPerChunk / 4 > s.siteChunks.size() * kSiteWordsPerChunk) {
    // Outside a capture: room for the next captures (a capture cannot allocate).
    void* chunk = nullptr;
    auto ctl = static_cast<cudaStream_t>(s.control);
    TSR_CUDA(cudaMalloc(&chunk, kSiteWordsPerChunk * sizeof(uint32_t)), options_.rank);
    s.siteChunks.push_back(chunk);
    TSR_CUDA(cudaMemsetAsync(chunk, 0, kSiteWordsPerChunk * sizeof(uint32_t), ctl), options_.rank);
    TSR_CUDA(cudaStreamSynchronize(ctl), options_.rank);
  }
  item.doneWord = s.eagerWord;
  item.doneValue = ++s.ticket;
  TSR_CHECK(trigger(false));
  return exec::streamWaitValue32(stream, s.eagerWord, item.doneValue, true);
#else
  (void)stream;
  (void)groups;
  return TSR_FAIL(tsrInternalError, "rank %d: post without CUDA", options_.rank);
#endif
}

Result DeviceExecutor::enqueue(const CollCall& call, const std::shared_ptr<const Plan>& plan,
                               uint64_t callNo, void* stream) {
  State& s = *state_;
  auto it = s.plans.find(plan.get());
  if (it == s.plans.end()) {
#if TESSERA_HAVE_CUDA
    bool capturing = false;
    if (!emulated() && exec::streamIsCapturing(stream, &capturing) == tsrSuccess && capturing)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: call %llu is the first use of plan %s and is being captured into "
                      "a graph; binding a plan allocates and copies memory, which a capture "
                      "forbids: make the same call once outside the capture first",
                      options_.rank, static_cast<unsigned long long>(callNo), plan->name.c_str());
#endif
    auto dbp = std::make_unique<DeviceBoundPlan>();
    Result r = bindDevicePlan(this, plan, options_.ctas, dbp.get());
    // Binding talks to peers: a failure half-way leaves them out of step for good.
    if (r != tsrSuccess) return options_.engine->poison(r);
    it = s.plans.emplace(plan.get(), std::move(dbp)).first;
  }
  const DeviceBoundPlan& dbp = *it->second;
  const BoundPlan& bp = dbp.compiled;
  const uint64_t es = dtypeSize(call.dtype);
  exec::WorkItem item{};
  item.kind = exec::kItemRun;
  item.plan = dbp.devicePlan;
  item.input = static_cast<const char*>(call.sendbuf);
  item.output = static_cast<char*>(call.recvbuf);
  item.count = call.count;
  // The slice as every executor cuts it (ops.hpp, sliceElements): every rank alike.
  item.slice =
      exec::sliceElements(options_.scratchBytes, bp.maxScratchSegments, bp.cps, es, call.count);
  if (item.slice == 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: %s (call %llu): a scratch of %zu bytes cannot hold one slice of the "
                    "plan (%d segments of %d chunks of 64 bytes); raise TESSERA_SCRATCH_BYTES",
                    options_.rank, bp.label.c_str(), static_cast<unsigned long long>(callNo),
                    options_.scratchBytes, bp.maxScratchSegments, bp.cps);
  item.iters = exec::sliceIterations(call.count, item.slice);
  item.callNo = callNo;
  item.root = call.root;
  item.collective = static_cast<uint8_t>(call.collective);
  item.dtype = static_cast<uint8_t>(call.dtype);
  const bool reducing = collectiveReduces(call.collective);
  item.redKind = static_cast<uint8_t>(call.op.kind);
  item.preOp = reducing && call.op.kind == RedKind::kPreMulSum ? 1 : 0;
  if (item.preOp) {
    dtypeVisit(call.dtype, [&](auto tag) {
      using T = decltype(tag);
      typename ElemTraits<T>::Compute scalar = preMulScalar<T>(call.op);
      static_assert(sizeof scalar <= sizeof item.scalarBits);
      std::memcpy(&item.scalarBits, &scalar, sizeof scalar);  // little end first on x86 / arm
    });
  }
  item.postAvg = reducing && call.op.kind == RedKind::kAvg &&
                         (call.collective != Collective::kReduce || options_.rank == call.root)
                     ? 1
                     : 0;
  s.lastCall = callNo;
  return post(item, stream);
}

Result DeviceExecutor::synchronize() {
  State& s = *state_;
  if (emulated()) {
    auto t0 = std::chrono::steady_clock::now();
    for (uint32_t iter = 0; static_cast<int32_t>(exec::loadAcquire32(s.eagerWord) - s.ticket) < 0;
         ++iter) {
      // Aborted and the resident CTAs gone: calls posted after they left never complete.
      if ((iter & 63) == 0 && exec::loadAcquire32(s.q.abortFlag) != 0 &&
          s.threadsDone.load(std::memory_order_acquire) == static_cast<int>(s.threads.size())) {
        TSR_CHECK(error());
        return TSR_FAIL(tsrRemoteError, "rank %d: the device executor was aborted", options_.rank);
      }
      // A little beyond the executing side's own deadline, so that its record (naming the
      // worker, op and peer) comes first.
      if (secondsSince(t0) > options_.timeoutSeconds * 1.25 + 0.5) {
        TSR_CHECK(error());
        return TSR_FAIL(
            tsrTimeout, "rank %d: device calls up to call %llu did not complete within %.3g s",
            options_.rank, static_cast<unsigned long long>(s.lastCall), options_.timeoutSeconds);
      }
      device::backoff(iter);
    }
  }
  return error();
}

Result DeviceExecutor::error() {
  State& s = *state_;
  if (s.failed == tsrSuccess && device::loadAcquire(&s.q.error->valid) == 1) {
    const exec::ErrorRecord& e = *s.q.error;
    static const char* const kWhy[] = {
        "no reason",
        "a wait passed its deadline",
        "the communicator was aborted",
        "the work queue stayed full",
        "a proxy (port channel) operation failed",
        "a range did not fit its buffer",
        "an op the device executor cannot run (a load from an unmapped peer)",
        "the queue had failed before"};
    const char* why = e.why >= 0 && e.why < 8 ? kWhy[e.why] : "an unknown reason";
    s.failed = static_cast<Result>(e.code);
    if ((e.callNo & exec::kP2PCallBit) != 0)
      s.failedWhy = p2pFailureText(e, options_.rank, why);
    else
      s.failedWhy = strprintf(
          "rank %d: device call %llu failed: %s (CTA %d, worker %d, plan op %d, "
          "peer rank %d)",
          options_.rank, static_cast<unsigned long long>(e.callNo), why, e.cta, e.worker, e.op,
          e.peer);
  }
#if TESSERA_HAVE_CUDA
  if (s.failed == tsrSuccess && !emulated() && s.stream != nullptr) {
    cudaError_t ce = cudaStreamQuery(static_cast<cudaStream_t>(s.stream));
    if (ce != cudaSuccess && ce != cudaErrorNotReady) {
      s.failed = tsrUnhandledCudaError;
      s.failedWhy = strprintf("rank %d: the resident kernel failed: %s", options_.rank,
                              cudaGetErrorString(ce));
    }
  }
#endif
  if (s.failed == tsrSuccess) return tsrSuccess;
  return TSR_FAIL(s.failed, "%s", s.failedWhy.c_str());
}

void DeviceExecutor::abort() {
  exec::storeRelease32(state_->q.abortFlag, 1);
  exec::storeRelease32(state_->q.stopFlag, 1);
}

}  // namespace tessera
