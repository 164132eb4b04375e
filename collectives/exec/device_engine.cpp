// EngineImpl's device-executor entry points (engine.hpp, "the device executor"): the same checks
// and call numbering as EngineImpl::start, the plan chosen by the tuner over the device
// executor's transports (zero-copy where the call's buffers lie in windows), windows, and the
// executor made on the first call (or window).
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/device/stream_ops.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/host_ops.hpp"
#include "core/build_config.hpp"
#include "core/datatype.hpp"
#include "core/env.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// An env value when the registry declares the name, else `fallback`.
Result envIntOr(const char* name, int64_t fallback, int64_t* out) {
  *out = fallback;
  if (envFind(name) == nullptr) return tsrSuccess;
  return envInt(name, out);
}

}  // namespace

// The transport classes the tuner sees for device calls, agreed by one allGather at the first
// device call (bind.cpp, agreeClasses): the device kinds on a GPU, the host ones in the emulation.
Result EngineImpl::deviceTransportClasses() {
  Result r = agreeClasses(options_.deviceEmulation, &deviceIntra_, &deviceInter_);
  if (r == tsrSuccess && !tunerAgreed_) r = agreeTuner();
  // NICs per host: the fewest of any rank's host; PCIe: whether any rank's GPU reaches a peer's
  // over PCIe only; so that every rank's tuner sees the same.
  std::vector<int32_t> mine(2 * static_cast<size_t>(nranks_), 0);
  mine[2 * static_cast<size_t>(rank_)] = std::max(1, options_.nicsPerHost);
  mine[2 * static_cast<size_t>(rank_) + 1] = options_.devicePcie ? 1 : 0;
  if (r == tsrSuccess) r = ctx_->bootstrap().allGather(mine.data(), 2 * sizeof(int32_t));
  if (r == tsrSuccess) {
    int32_t nics = mine[0];
    bool pcie = false;
    for (int p = 0; p < nranks_; ++p) {
      nics = std::min(nics, mine[2 * static_cast<size_t>(p)]);
      pcie = pcie || mine[2 * static_cast<size_t>(p) + 1] != 0;
    }
    planner_.setDevice(deviceScratchBytes_, nics, pcie);
  }
  if (r != tsrSuccess) return poison(r);  // peers may be past the allGather: out of step
  deviceClassesAgreed_ = true;
  return tsrSuccess;
}

Result EngineImpl::devicePlan(const CollCall& call, int workers, bool zeroCopy,
                              std::shared_ptr<const Plan>* out, bool* useLL) {
  if (useLL != nullptr) *useLL = false;
  if (call.plan) {
    TSR_CHECK(planner_.givenPlan(call));
    *out = call.plan;
    return tsrSuccess;
  }
  if (!call.algorithm.empty()) {
    if (zeroCopy) {  // the family's zero-copy form where it has one
      TSR_CHECK(planner_.namedPlan(call, true, out));
      if (*out) return tsrSuccess;
    }
    return planner_.namedPlan(call, false, out);
  }
  if (!deviceClassesAgreed_) TSR_CHECK(deviceTransportClasses());
  PlanChoice* choice = nullptr;
  TSR_CHECK(planner_.choose(ExecKind::kDevice, call.collective, callBytes(call, nranks_),
                            collectiveHasRoot(call.collective) ? call.root : 0,
                            zeroCopy ? Staging::kZeroCopy : Staging::kScratch,
                            {deviceIntra_, deviceInter_}, workers, &choice));
  *out = choice->plan;
  if (useLL != nullptr) *useLL = choice->ll;
  return tsrSuccess;
}

Result EngineImpl::enqueue(const CollCall& call, void* stream) {
  uint64_t callNo = 0;
  TSR_CHECK(admit(call, &callNo));
  if (call.count == 0) {
    planner_.take(callNo);
    return tsrSuccess;
  }
  if (!options_.deviceEmulation && options_.cudaDevice < 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: a collective on device buffers needs this rank's GPU (the "
                    "communicator has none)",
                    rank_);
  if (nranks_ == 1) {
    // The result is the input (after premulsum's pre-op): no plan, no executor.
    size_t bytes = call.count * dtypeSize(call.dtype);
    bool pre = collectiveReduces(call.collective) && call.op.kind == RedKind::kPreMulSum;
    if (pre && !options_.deviceEmulation)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank 0: premulsum on one rank on device buffers is not supported yet "
                      "(call %llu); use a communicator of two ranks or more, or host buffers",
                      static_cast<unsigned long long>(callNo));
    planner_.take(callNo);
    if (options_.deviceEmulation) {
      if (pre) {
        const void* src = call.sendbuf;
        uint8_t one = 1;
        HostReduceArgs a{call.op, call.dtype, &src, 1, &one, call.recvbuf, nullptr, call.count};
        return hostReduce(a);
      }
      if (call.sendbuf != call.recvbuf) std::memmove(call.recvbuf, call.sendbuf, bytes);
      return tsrSuccess;
    }
#if TESSERA_HAVE_CUDA
    if (call.sendbuf == call.recvbuf) return tsrSuccess;
    cudaError_t e = cudaMemcpyAsync(call.recvbuf, call.sendbuf, bytes, cudaMemcpyDeviceToDevice,
                                    static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError, "rank %d: cudaMemcpyAsync of %zu bytes failed: %s",
                      rank_, bytes, cudaGetErrorString(e));
#endif
    return tsrSuccess;
  }
  if (!device_) {
    bool capturing = false;
    if (!options_.deviceEmulation && exec::streamIsCapturing(stream, &capturing) == tsrSuccess &&
        capturing)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: call %llu is this communicator's first device collective and is "
                      "being captured into a graph; starting the device executor allocates memory "
                      "and launches its kernel, which a capture forbids: make one device call "
                      "outside the capture first",
                      rank_, static_cast<unsigned long long>(callNo));
    TSR_CHECK(makeDeviceExecutor());
  }
  // Buffers in windows (same offsets on every rank, the caller's promise): zero-copy plans. Else
  // buffers registered locally (every rank passes registered buffers to the same call, NCCL's
  // rule): where every rank is in this process, zero-copy through boards; where the peers map
  // each other's memory across processes, through boards too once every peer has mapped every
  // rank's registration (shareLocal: a host exchange per call, so only where the tuner's choice on
  // them is a zero-copy plan).
  WindowUse windows;
  bool inWindows = device_->windowsOf(call, &windows);
  DeviceRegistration* regs[2] = {nullptr, nullptr};
  std::shared_ptr<const Plan> plan;  // the choice, where asking whether to share made it already
  bool ll = false;
  if (!inWindows && !deviceRegistrations_.empty() && locallyRegistered(call, regs)) {
    bool maps = false;
    if (device_->peersInProcess()) {
      windows.board = true;
      inWindows = true;
    } else if (Result r = device_->peersMapEachOther(&maps); r != tsrSuccess) {
      return poison(r);  // the peers are past the agreement
    } else if (maps) {
      std::shared_ptr<const Plan> zc;
      bool zll = false;
      TSR_CHECK(devicePlan(call, device_->ctas(), true, &zc, &zll));
      if (zc && zc->zeroCopy && !zll) {
        LocalBuffer bufs[2];
        const void* ptrs[2] = {call.sendbuf, call.recvbuf};
        for (int k = 0; k < 2; ++k) {
          if (regs[k] == nullptr) continue;
          bufs[k] =
              LocalBuffer{regs[k]->key, regs[k]->base, regs[k]->bytes,
                          static_cast<uint64_t>(static_cast<const char*>(ptrs[k]) - regs[k]->base)};
        }
        TSR_CHECK(device_->shareLocal(callNo, stream, bufs, &windows, &inWindows));
        if (inWindows) plan = std::move(zc);
      }
    }
  }
  if (!plan) TSR_CHECK(devicePlan(call, device_->ctas(), inWindows, &plan, &ll));
  if (ll) {
    bool used = false;
    TSR_CHECK(device_->enqueueLL(call, callNo, stream, &used));
    if (used) {
      planner_.take(callNo);
      return tsrSuccess;
    }
  }
  planner_.take(callNo);
  TSR_CHECK(device_->enqueue(call, plan, callNo, stream, inWindows ? &windows : nullptr));
  for (DeviceRegistration* r : regs) {
    if (r == nullptr) continue;
    r->used = true;  // a captured call leaves the ticket of the last eager one
    r->lastTicket = device_->lastTicket();
  }
  return tsrSuccess;
}

bool EngineImpl::locallyRegistered(const CollCall& call, DeviceRegistration* out[2]) const {
  const size_t elem = call.count * dtypeSize(call.dtype);
  const size_t bytes[2] = {elem * static_cast<size_t>(inputSegments(call.collective, nranks_)),
                           elem * static_cast<size_t>(outputSegments(call.collective, nranks_))};
  const void* ptrs[2] = {call.sendbuf, call.recvbuf};
  // A buffer this rank does not use (a non-root's broadcast input or reduce output) is never
  // read through the boards (the pointers are each rank's own): it need not be registered.
  const bool uses[2] = {call.collective != Collective::kBroadcast || call.root == rank_,
                        call.collective != Collective::kReduce || call.root == rank_};
  for (int k = 0; k < 2; ++k) {
    out[k] = nullptr;
    if (!uses[k]) continue;
    const char* p = static_cast<const char*>(ptrs[k]);
    for (const auto& r : deviceRegistrations_)
      if (p >= r->base && static_cast<size_t>(p - r->base) <= r->bytes &&
          bytes[k] <= r->bytes - static_cast<size_t>(p - r->base))
        out[k] = r.get();
    if (out[k] == nullptr) return false;
  }
  return true;
}

Result EngineImpl::registerDeviceBuffer(void* ptr, size_t bytes, void** handle) {
  if (ptr == nullptr || bytes == 0 || handle == nullptr)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: registerDeviceBuffer(%p, %zu bytes) needs a buffer", rank_, ptr,
                    bytes);
  auto r = std::make_unique<DeviceRegistration>();
  r->key = nextRegistrationKey_++;
  r->base = static_cast<char*>(ptr);
  r->bytes = bytes;
  *handle = r.get();
  deviceRegistrations_.push_back(std::move(r));
  return tsrSuccess;
}

Result EngineImpl::deregisterDeviceBuffer(void* handle) {
  auto it = std::find_if(deviceRegistrations_.begin(), deviceRegistrations_.end(),
                         [&](const auto& r) { return r.get() == handle; });
  if (it == deviceRegistrations_.end())
    return TSR_FAIL(tsrInvalidArgument, "rank %d: deregisterDeviceBuffer(%p): not a registration",
                    rank_, handle);
  const DeviceRegistration& r = **it;
  if (r.used && device_ && !device_->eagerDone(r.lastTicket))
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: buffer %p (%zu bytes) was not deregistered: a device call on it is "
                    "still in flight on this rank; synchronize its stream first",
                    rank_, static_cast<void*>(r.base), r.bytes);
  if (device_) device_->dropLocal(r.key);  // the peers drop their mappings at the next exchange
  deviceRegistrations_.erase(it);
  return tsrSuccess;
}

Result EngineImpl::registerWindow(void* ptr, size_t bytes, void** handle) {
  TSR_CHECK(alive());
  if (handle == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: registerWindow needs a handle", rank_);
  if (!options_.deviceEmulation && options_.cudaDevice < 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: a window on device buffers needs this rank's GPU (the communicator "
                    "has none)",
                    rank_);
  if (!device_) TSR_CHECK(makeDeviceExecutor());
  DeviceWindow* w = nullptr;
  TSR_CHECK(device_->registerWindow(ptr, bytes, &w));
  *handle = w;
  return tsrSuccess;
}

Result EngineImpl::deregisterWindow(void* handle) {
  TSR_CHECK(alive());
  if (!device_)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: %p is not a window of this communicator", rank_,
                    handle);
  return device_->deregisterWindow(static_cast<DeviceWindow*>(handle));
}

bool allToSelf(int rank, const std::vector<P2PCall>& calls) {
  return !calls.empty() && std::all_of(calls.begin(), calls.end(),
                                       [rank](const P2PCall& c) { return c.peer == rank; });
}

Result copyToSelfOnStream(int rank, const std::vector<P2PCall>& calls, void* stream, bool emulated,
                          uint64_t groupNo) {
  if (!allToSelf(rank, calls))
    return TSR_FAIL(tsrInternalError, "rank %d: send/recv group %llu names peers other than itself",
                    rank, static_cast<unsigned long long>(groupNo));
  std::vector<const P2PCall*> sends, recvs;
  TSR_CHECK(pairCallsToSelf(rank, rank + 1, calls, &sends, &recvs));  // every peer is `rank`
  for (size_t i = 0; i < sends.size(); ++i) {
    const size_t bytes = sends[i]->count * dtypeSize(sends[i]->dtype);
    if (bytes == 0 || sends[i]->sendbuf == recvs[i]->recvbuf) continue;
    if (emulated) {
      std::memmove(recvs[i]->recvbuf, sends[i]->sendbuf, bytes);
      continue;
    }
#if TESSERA_HAVE_CUDA
    cudaError_t e = cudaMemcpyAsync(recvs[i]->recvbuf, sends[i]->sendbuf, bytes,
                                    cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError,
                      "rank %d: cudaMemcpyAsync of %zu bytes (send/recv group %llu) failed: %s",
                      rank, bytes, static_cast<unsigned long long>(groupNo), cudaGetErrorString(e));
#else
    (void)stream;
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: send/recv group %llu is on device buffers, and tessera was built "
                    "without CUDA",
                    rank, static_cast<unsigned long long>(groupNo));
#endif
  }
  return tsrSuccess;
}

Result EngineImpl::enqueueP2P(const std::vector<P2PCall>& calls, void* stream) {
  // The host path's checks (startP2P), before anything is set up or enqueued.
  TSR_CHECK(alive());
  TSR_CHECK(planner_.admitP2P(calls));
  if (calls.empty()) return tsrSuccess;
  if (!options_.deviceEmulation && options_.cudaDevice < 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: send/recv on device buffers needs this rank's GPU (the communicator "
                    "has none)",
                    rank_);
  if (calls.size() > exec::kP2PMaxCalls)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: a group has %zu sends and receives on device buffers for this "
                    "communicator; the device executor takes at most %u per group (a send to self "
                    "and its receive count two): split the group",
                    rank_, calls.size(), exec::kP2PMaxCalls);
  const uint64_t groupNo = ++p2pGroups_;
  // Sends to self only (one rank, or a group of this rank's own before any device call made the
  // executor): copies, in stream order (as enqueue does for one rank), without starting an
  // executor for them.
  if (nranks_ == 1 || (!device_ && allToSelf(rank_, calls)))
    return copyToSelfOnStream(rank_, calls, stream, options_.deviceEmulation, groupNo);
  if (!device_) {
    bool capturing = false;
    if (!options_.deviceEmulation && exec::streamIsCapturing(stream, &capturing) == tsrSuccess &&
        capturing)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: send/recv group %llu is this communicator's first device call and "
                      "is being captured into a graph; starting the device executor allocates "
                      "memory and launches its kernel, which a capture forbids: make one device "
                      "call outside the capture first",
                      rank_, static_cast<unsigned long long>(groupNo));
    TSR_CHECK(makeDeviceExecutor());
  }
  return device_->enqueueP2P(calls, groupNo, stream);
}

Result EngineImpl::makeDeviceExecutor() {
  {
    DeviceExecutorOptions o;
    o.engine = this;
    o.transports = ctx_;
    o.rank = rank_;
    o.nranks = nranks_;
    o.cudaDevice = options_.deviceEmulation ? -1 : options_.cudaDevice;
    o.timeoutSeconds = timeoutSeconds_;
    o.scratchBytes = deviceScratchBytes_;
    o.p2pSlotBytes = options_.deviceP2PSlotBytes;
    o.gpuRanksElsewhere = options_.gpuRanksElsewhere;
    int64_t minCtas = options_.minCtas, maxCtas = options_.maxCtas, threads = 256;
    if (minCtas <= 0) TSR_CHECK(envIntOr("TESSERA_MIN_CTAS", 1, &minCtas));
    if (maxCtas <= 0 && envRaw("TESSERA_MAX_CTAS") == nullptr)
      maxCtas = o.cudaDevice >= 0 ? kDeviceCtas : 2;  // emulated CTAs are host threads
    if (maxCtas <= 0) TSR_CHECK(envIntOr("TESSERA_MAX_CTAS", 2, &maxCtas));
    TSR_CHECK(envIntOr("TESSERA_DEVICE_THREADS", 256, &threads));
    // TESSERA_MAX_CTAS is the grid's size, at least TESSERA_MIN_CTAS (env_registry.cpp).
    o.ctas = static_cast<int>(std::max<int64_t>(1, std::max(minCtas, maxCtas)));
    o.threads = static_cast<int>(threads);
    std::string launch = "PERSISTENT";
    if (envFind("TESSERA_LAUNCH") != nullptr) TSR_CHECK(envEnum("TESSERA_LAUNCH", &launch));
    o.mode = launch == "KERNEL" ? LaunchMode::kKernel : LaunchMode::kPersistent;
    TSR_CHECK(DeviceExecutor::create(o, &device_));
  }
  return tsrSuccess;
}

Result EngineImpl::deviceSynchronize() { return device_ ? device_->synchronize() : tsrSuccess; }
Result EngineImpl::deviceError() { return device_ ? device_->error() : tsrSuccess; }
void EngineImpl::abortDevice() {
  if (device_) device_->abort();
}

}  // namespace tessera
