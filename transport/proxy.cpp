#include "transport/proxy.hpp"

#include "core/park.hpp"
#include "transport/context.hpp"
#include "transport/context_state.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kProxy;
constexpr size_t kLine = 64;  // head, tail, error and the doorbell each get their own line
// The host FIFO's memory: the ring, tail, error, head, then doorbell and parked flag.
constexpr size_t kFifoBytes = sizeof(device::ProxyTrigger) * ProxyService::kFifoSlots + 4 * kLine;

// Lays out a FIFO over `slots` (the ring, then tail and error on their own cache lines).
device::FifoDeviceHandle layoutFifo(char* slots, uint64_t* head, double timeoutSeconds) {
  size_t ring = sizeof(device::ProxyTrigger) * ProxyService::kFifoSlots;
  device::FifoDeviceHandle f{};
  f.triggers = reinterpret_cast<device::ProxyTrigger*>(slots);
  f.tail = reinterpret_cast<uint64_t*>(slots + ring);
  f.error = reinterpret_cast<uint64_t*>(slots + ring + kLine);
  f.head = head;
  f.size = ProxyService::kFifoSlots;
  f.timeoutNs = static_cast<uint64_t>(timeoutSeconds * 1e9);
  return f;
}
}  // namespace

Result ProxyService::create(TransportContext& context, std::unique_ptr<ProxyService>* out) {
  std::unique_ptr<ProxyService> p(new ProxyService());
  p->state_ = context.state();
  size_t bytes = kFifoBytes;
  TSR_CHECK(context.allocate(bytes, MemoryKind::kHost, &p->hostFifoMemory_));
  auto* host = static_cast<char*>(p->hostFifoMemory_->data());
  p->hostFifo_ = layoutFifo(host, reinterpret_cast<uint64_t*>(host + bytes - 2 * kLine),
                            p->state_->timeoutSeconds);
  p->hostFifo_.doorbell = reinterpret_cast<uint64_t*>(host + bytes - kLine);
  p->hostFifo_.parked = device::counterParkedFlag(p->hostFifo_.doorbell);
  if (p->state_->cudaDevice >= 0) {
    TSR_CHECK(context.allocate(bytes, MemoryKind::kCudaPinnedHost, &p->deviceFifoMemory_));
    TSR_CHECK(context.allocate(kLine, MemoryKind::kCuda, &p->deviceHeadMemory_));
    p->deviceFifo_ =
        layoutFifo(static_cast<char*>(p->deviceFifoMemory_->data()),
                   static_cast<uint64_t*>(p->deviceHeadMemory_->data()), p->state_->timeoutSeconds);
    p->hasDeviceFifo_ = true;
  }
  p->parksWhenIdle_ = !p->hasDeviceFifo_ && waitSettings().park;
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  *out = std::move(p);
  return tsrSuccess;
}

ProxyService::~ProxyService() { stop(); }

void ProxyService::stop() {
  std::lock_guard<std::mutex> lock(stopMutex_);
  stop_.store(true, std::memory_order_seq_cst);
  hostFifo_.ring(/*always=*/true);  // a parked thread wakes now, not at its slice's end
  if (thread_.joinable()) thread_.join();
}

uint32_t ProxyService::addChannel(ChannelEntry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Never reused: a trigger still queued for a removed channel must not run on a new one.
  uint32_t id = nextChannel_++;
  channels_.emplace(id, std::move(entry));
  return id;
}

void ProxyService::removeChannel(uint32_t channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  channels_.erase(channel);
}

Result ProxyService::error(std::string* sentence) const {
  auto code = static_cast<Result>(device::loadAcquire(hostFifo_.error));
  if (code == tsrSuccess && hasDeviceFifo_)
    code = static_cast<Result>(device::loadAcquire(deviceFifo_.error));
  std::lock_guard<std::mutex> lock(mutex_);
  *sentence = errorSentence_;
  return code;
}

Result ProxyService::execute(const device::ProxyTrigger& trigger) {
  uint32_t op = device::triggerOp(trigger.control);
  uint32_t channel = device::triggerChannel(trigger.control);
  ChannelEntry e;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = channels_.find(channel);
    if (it != channels_.end()) e = it->second;
  }
  if (!e.connection)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: proxy trigger names channel %u, which is not open", state_->rank,
                    channel);
  if (op & device::kTriggerPut)
    TSR_CHECK(e.connection->put(*e.remote, trigger.dstOffset, *e.local, trigger.srcOffset,
                                trigger.bytes));
  // Semaphore::signal adds on the same connection (createPortChannel checks it), so the add is
  // ordered after the puts; it also wakes the peer's thread if it parked on the counter (a bare
  // atomicAdd left a parked waiter to its 20 ms park slice on every signal).
  if (op & device::kTriggerSignal) TSR_CHECK(e.semaphore->signal());
  if (op & device::kTriggerFlush) TSR_CHECK(e.connection->flush());
  if (op & device::kTriggerClose) removeChannel(channel);
  return tsrSuccess;
}

void ProxyService::recordError(Result r) {
  if (device::loadAcquire(hostFifo_.error) != 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    errorSentence_ = lastErrorMessage();
  }
  device::storeRelease(hostFifo_.error, static_cast<uint64_t>(r));
  if (hasDeviceFifo_) device::storeRelease(deviceFifo_.error, static_cast<uint64_t>(r));
}

bool ProxyService::drain(const device::FifoDeviceHandle& fifo, uint64_t* tail) {
  bool did = false;
  for (int batch = 0; batch < 64; ++batch) {
    device::ProxyTrigger* slot = &fifo.triggers[*tail % fifo.size];
    uint64_t control = device::loadAcquire(&slot->control);
    if (control == 0) break;
    device::ProxyTrigger t = *slot;
    t.control = control;
    device::storeRelaxed(&slot->control, 0);
    Result r = execute(t);
    if (r != tsrSuccess) recordError(r);
    ++*tail;
    device::storeRelease(fifo.tail, *tail);
    did = true;
  }
  return did;
}

void ProxyService::run() {
  ScopedRank scoped(state_->rank);
  uint64_t hostTail = 0, deviceTail = 0;
  uint32_t idle = 0;
  // Without a device FIFO every producer is a host thread that rings the doorbell: the thread
  // waits as host waits do (spin, yield where the core is shared, then park on the doorbell).
  // Kernels cannot wake it, so with a device FIFO it polls with a bounded backoff.
  bool parks = parksWhenIdle_;
  HostWaiter waiter;
  ParkSet park;
  if (parks) park.add(device::counterFutexWord(hostFifo_.doorbell), hostFifo_.parked);
  while (!stop_.load(std::memory_order_acquire)) {
    bool did = drain(hostFifo_, &hostTail);
    if (hasDeviceFifo_) did = drain(deviceFifo_, &deviceTail) || did;
    if (did) {
      idle = 0;
      waiter.moved();
      continue;
    }
    if (!parks) {
      // Spin briefly, then yield, then short sleeps (the cap bounds the added latency).
      device::backoff(idle < 70000 ? idle++ : 70000);  // ends in 100 us sleeps when idle
      continue;
    }
    if (waiter.idle() == WaitStep::kPoll) continue;
    park.arm();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    const device::ProxyTrigger* next = &hostFifo_.triggers[hostTail % hostFifo_.size];
    if (__atomic_load_n(&next->control, __ATOMIC_SEQ_CST) != 0 ||
        stop_.load(std::memory_order_seq_cst)) {
      park.disarm();
      continue;
    }
    // The slice bounds a wake that never comes (a producer that died between its push and its
    // ring); the loop then looks again.
    park.sleep(HostWaiter::kParkSliceNs);
    parks_.store(threadWaitStats().parks, std::memory_order_relaxed);
    parkTimeouts_.store(threadWaitStats().timeouts, std::memory_order_relaxed);
  }
}

}  // namespace tessera
