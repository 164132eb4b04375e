// The device executor's host side (device_executor.hpp): the work queue's layout, the resident
// grid's start and a shutdown that never hangs, binding plans, filling items, errors and abort.
// Where the emulation and the GPU differ, the executing side (executing_side.hpp) does it.
#include "collectives/exec/device/device_executor.hpp"

#include <chrono>
#include <cstring>
#include <thread>

#include "collectives/exec/device/executing_side.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "core/datatype.hpp"
#include "core/idle_release.hpp"
#include "core/reduce_op.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

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

}  // namespace

struct DeviceExecutor::State {
  HostQueue hq;
  std::unique_ptr<ExecutingSide> side;
  bool resident = false;
  std::map<const Plan*, std::unique_ptr<DeviceBoundPlan>> plans;
  std::vector<std::shared_ptr<Connection>> connections;  // by peer
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
  const DeviceExecutorOptions& o = ex->options_;  // the sides keep a reference to it
  if (ex->emulated())
    s.side = makeHostSide(o, s.hq);
  else
    TSR_CHECK(makeCudaSide(o, s.hq, &s.side));
  QueueLayout L(options.queueSlots);
  char* dev = nullptr;
  char* shared = nullptr;
  TSR_CHECK(s.side->allocateQueue(L.deviceBytes, L.hostBytes, &dev, &shared));
  exec::WorkQueueHandle& q = s.hq.q;
  q.items = reinterpret_cast<exec::WorkItem*>(dev + L.items);
  q.posted = reinterpret_cast<uint64_t*>(dev + L.posted);
  q.consumed = reinterpret_cast<uint64_t*>(dev + L.consumed);
  q.grid = reinterpret_cast<exec::GridSync*>(dev + L.grid);
  s.hq.eagerWord = reinterpret_cast<uint32_t*>(shared + L.eager);
  q.error = reinterpret_cast<exec::ErrorRecord*>(shared + L.error);
  q.abortFlag = reinterpret_cast<uint32_t*>(shared + L.abortFlag);
  q.stopFlag = reinterpret_cast<uint32_t*>(shared + L.stopFlag);
  q.size = options.queueSlots;
  q.timeoutNs = static_cast<uint64_t>(options.timeoutSeconds * 1e9);
  if (options.mode == LaunchMode::kPersistent) {
    // Counted before the launch, so that no free of another rank runs under it unheld
    // (idle_release.hpp).
    residentGridStarting(ex->registryDevice(), options.ctas);
    Result r = s.side->startResident();
    if (r != tsrSuccess) {
      residentGridEnded(ex->registryDevice(), options.ctas);
      return r;
    }
    s.resident = true;
  }
  TSR_INFO("rank %d: device executor %s, %s mode, %d CTAs", options.rank,
           ex->emulated() ? "emulated on host threads" : "on the GPU",
           options.mode == LaunchMode::kPersistent ? "persistent" : "launch", options.ctas);
  *out = std::move(ex);
  return tsrSuccess;
}

DeviceExecutor::~DeviceExecutor() {
  State& s = *state_;
  if (!s.side) return;  // create() failed before the side existed
  std::unique_ptr<SideScope> scope = s.side->enter();
  // Whether the resident grid ended within `seconds`.
  auto gridEnded = [&s](double seconds) {
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      if (s.side->gridEnded()) return true;
      if (secondsSince(t0) > seconds) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  exec::WorkQueueHandle& q = s.hq.q;
  bool ended = true;
  if (s.resident) {
    s.side->postStop();
    const double t = options_.timeoutSeconds;
    ended = gridEnded(t);
    if (!ended) {  // a call still runs: leave once idle, then give up the waits
      TSR_WARN("rank %d: the device executor did not stop within %.3g s; raising stop and abort",
               options_.rank, t);
      exec::storeRelease32(q.stopFlag, 1);
      ended = gridEnded(0.1 * t + 0.05);
      if (!ended) {
        exec::storeRelease32(q.abortFlag, 1);
        ended = gridEnded(t);
      }
    }
  }
  // Calls whose trigger ran after the grid left are never run: release their streams (their
  // results are not there; the communicator's error says why, or destroy was early).
  if (s.hq.eagerWord != nullptr) exec::storeRelease32(s.hq.eagerWord, s.hq.ticket);
  if (!ended) {
    // Never hang: the executing side keeps the memory it may still touch.
    TSR_WARN(
        "rank %d: the device executor's resident grid did not end after abort; its memory "
        "is leaked",
        options_.rank);
    s.side->abandon();
    (void)state_.release();
    for (auto& w : windows_) (void)w.release();
    for (auto& t : retiredTables_) (void)new std::shared_ptr<Memory>(std::move(t));
    for (auto* m : {&board_, &peerBoards_}) (void)new std::shared_ptr<Memory>(std::move(*m));
    for (auto& m : peerBoardMaps_) (void)new std::shared_ptr<RemoteMemory>(std::move(m));
    for (auto& [key, l] : locals_) (void)l.release();
    for (auto& [key, m] : imports_) (void)new std::shared_ptr<RemoteMemory>(std::move(m));
    return;
  }
  s.side->quiesce();
  // Our grid has ended. If it was the last of this process on the device, the releases other
  // ranks held back run now, on this thread. Ours (the plans' memory, the queue) go through the
  // same registry: a free never waits for another communicator's grid (idle_release.hpp).
  if (s.resident) residentGridEnded(registryDevice(), options_.ctas);
  s.plans.clear();  // device memory of the plans, windows and boards, while the GPU is current
  windows_.clear();
  locals_.clear();
  imports_.clear();
  retiredTables_.clear();
  peerBoardMaps_.clear();
  peerBoards_.reset();
  board_.reset();
  s.side->release();
}

Result residentGridFits(int rank, int device, int ctas, int others, int sms, int ctasPerSm,
                        int threads) {
  const int64_t slots = static_cast<int64_t>(sms) * ctasPerSm;
  if (ctasPerSm < 1)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: a CTA of %d threads of the resident kernel does not fit one "
                    "multiprocessor of device %d: lower TESSERA_DEVICE_THREADS",
                    rank, threads, device);
  if (others + ctas > slots)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: device %d holds %lld resident CTAs of %d threads at once (%d "
                    "multiprocessors x %d), and this process's resident grids there would take "
                    "%d (%d already running, %d for this communicator): every grid must be "
                    "resident at once, so lower TESSERA_MAX_CTAS (minCTAs / maxCTAs), put fewer "
                    "ranks on the GPU, or use launch mode (TESSERA_LAUNCH=kernel)",
                    rank, device, static_cast<long long>(slots), threads, sms, ctasPerSm,
                    others + ctas, others, ctas);
  return tsrSuccess;
}

int DeviceExecutor::registryDevice() const {
  return emulated() ? kEmulatedDevice : options_.cudaDevice;
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
  std::unique_ptr<SideScope> scope = state_->side->enter();
  TSR_CHECK(options_.transports->allocate(bytes, emulated() ? MemoryKind::kHost : MemoryKind::kCuda,
                                          out));
  return upload((*out)->data(), nullptr, bytes);  // zeroed: scratch and images start clean
}

bool DeviceExecutor::capturing(void* stream) {
  bool c = false;
  return state_->side->capturing(stream, &c) == tsrSuccess && c;
}

Result DeviceExecutor::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return tsrSuccess;
  return state_->side->upload(dst, src, bytes);
}

Result DeviceExecutor::post(exec::WorkItem item, void* stream, const exec::P2PGroupDesc* group,
                            exec::P2PGroupDesc* groups) {
  if (group != nullptr && groups == nullptr && options_.mode == LaunchMode::kPersistent)
    return TSR_FAIL(tsrInternalError, "rank %d: a send/recv group posted without a group ring",
                    options_.rank);
  return state_->side->post(item, stream, group, groups);
}

bool DeviceExecutor::eagerDone(uint32_t ticket) const {
  return static_cast<int32_t>(exec::loadAcquire32(state_->hq.eagerWord) - ticket) >= 0;
}

uint32_t DeviceExecutor::lastTicket() const { return state_->hq.ticket; }

Result DeviceExecutor::enqueue(const CollCall& call, const std::shared_ptr<const Plan>& plan,
                               uint64_t callNo, void* stream, const WindowUse* windows) {
  State& s = *state_;
  if (plan->zeroCopy && windows == nullptr)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: plan %s (call %llu) is zero-copy, and the call's buffers do not lie "
                    "in windows: the device executor runs zero-copy plans only on buffers every "
                    "rank registered with tsrCommWindowRegister, at the same offsets",
                    options_.rank, plan->name.c_str(), static_cast<unsigned long long>(callNo));
  auto it = s.plans.find(plan.get());
  if (it == s.plans.end()) {
    bool capturing = false;
    if (s.side->capturing(stream, &capturing) == tsrSuccess && capturing)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: call %llu is the first use of plan %s and is being captured into "
                      "a graph; binding a plan allocates and copies memory, which a capture "
                      "forbids: make the same call once outside the capture first",
                      options_.rank, static_cast<unsigned long long>(callNo), plan->name.c_str());
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
  item.slice = exec::sliceElements(options_.scratchBytes, bp.scratchChunks, bp.cps, es, call.count);
  if (item.slice == 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: %s (call %llu): a scratch of %zu bytes cannot hold one slice of the "
                    "plan (%d scratch chunks of at least 64 bytes); raise TESSERA_SCRATCH_BYTES",
                    options_.rank, bp.label.c_str(), static_cast<unsigned long long>(callNo),
                    options_.scratchBytes, bp.scratchChunks);
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
  if (plan->zeroCopy && windows->board) {
    if (!peerBoards_) {
      bool capturing = false;
      if (s.side->capturing(stream, &capturing) == tsrSuccess && capturing)
        return TSR_FAIL(tsrInvalidUsage,
                        "rank %d: call %llu is the first zero-copy call on locally registered "
                        "buffers and is being captured into a graph; setting up the boards "
                        "allocates memory, which a capture forbids: make one such call outside "
                        "the capture first",
                        options_.rank, static_cast<unsigned long long>(callNo));
      Result r = ensureBoards();
      if (r != tsrSuccess) return options_.engine->poison(r);  // peers are out of step
    }
    item.board = static_cast<exec::PeerPointers*>(board_->data());
    item.peerBoards = static_cast<exec::PeerPointers* const*>(peerBoards_->data());
    if (windows->mapped) {  // between processes: publish the buffers as each peer mapped them
      item.publishMapped = 1;
      item.peerInput = windows->localInput
                           ? static_cast<char* const*>(windows->localInput->remote->data())
                           : nullptr;
      item.peerInputOffset = windows->inputOffset;
      item.peerOutput = windows->localOutput
                            ? static_cast<char* const*>(windows->localOutput->remote->data())
                            : nullptr;
      item.peerOutputOffset = windows->outputOffset;
    }
  } else if (plan->zeroCopy) {
    item.peerInput =
        windows->input ? static_cast<char* const*>(windows->input->table->data()) : nullptr;
    item.peerInputOffset = windows->inputOffset;
    item.peerOutput =
        windows->output ? static_cast<char* const*>(windows->output->table->data()) : nullptr;
    item.peerOutputOffset = windows->outputOffset;
  }
  bool captured = false;
  if (plan->zeroCopy && s.side->capturing(stream, &captured) != tsrSuccess) captured = false;
  s.hq.lastCall = callNo;
  TSR_CHECK(post(item, stream));
  if (plan->zeroCopy) {
    noteWindowUse(*windows, captured, s.hq.ticket);
    ++zeroCopyCalls_;
  }
  return tsrSuccess;
}

Result DeviceExecutor::synchronize() {
  State& s = *state_;
  // The eager done word is host memory (mapped pinned memory on a GPU), so the host waits for it
  // on a GPU too (tsrCommFinalize). Launch mode on a GPU posts no ticket: nothing to wait for.
  {
    auto t0 = std::chrono::steady_clock::now();
    for (uint32_t iter = 0;
         static_cast<int32_t>(exec::loadAcquire32(s.hq.eagerWord) - s.hq.ticket) < 0; ++iter) {
      // Aborted and the resident CTAs gone: calls posted after they left never complete. On a
      // GPU the abort alone says so (a trigger still waiting on its stream never runs).
      if ((iter & 63) == 0 && exec::loadAcquire32(s.hq.q.abortFlag) != 0 &&
          (!emulated() || s.side->gridEnded())) {
        TSR_CHECK(error());
        return TSR_FAIL(tsrRemoteError, "rank %d: the device executor was aborted", options_.rank);
      }
      // A little beyond the executing side's own deadline, so that its record (naming the
      // worker, op and peer) comes first.
      if (secondsSince(t0) > options_.timeoutSeconds * 1.25 + 0.5) {
        TSR_CHECK(error());
        return TSR_FAIL(
            tsrTimeout, "rank %d: device calls up to call %llu did not complete within %.3g s",
            options_.rank, static_cast<unsigned long long>(s.hq.lastCall), options_.timeoutSeconds);
      }
      device::backoff(iter);
    }
  }
  return error();
}

Result DeviceExecutor::error() {
  State& s = *state_;
  if (s.failed == tsrSuccess && device::loadAcquire(&s.hq.q.error->valid) == 1) {
    const exec::ErrorRecord& e = *s.hq.q.error;
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
  if (s.failed == tsrSuccess) {
    std::string why;
    if (Result own = s.side->ownFailure(&why); own != tsrSuccess) {
      s.failed = own;
      s.failedWhy = why;
    }
  }
  if (s.failed == tsrSuccess) return tsrSuccess;
  return TSR_FAIL(s.failed, "%s", s.failedWhy.c_str());
}

void DeviceExecutor::abort() {
  exec::storeRelease32(state_->hq.q.abortFlag, 1);
  exec::storeRelease32(state_->hq.q.stopFlag, 1);
}

}  // namespace tessera
