#include "transport/proxy.hpp"

#include "transport/context.hpp"
#include "transport/context_state.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kProxy;
constexpr size_t kLine = 64;  // head, tail and error each get their own cache line
}  // namespace

Result ProxyService::create(TransportContext& context, std::unique_ptr<ProxyService>* out) {
  std::unique_ptr<ProxyService> p(new ProxyService());
  p->state_ = context.state();
  // The GPU pushes into pinned host memory; host producers into plain (memfd) host memory.
  MemoryKind kind = p->state_->cudaDevice >= 0 ? MemoryKind::kCudaPinnedHost : MemoryKind::kHost;
  size_t ring = sizeof(device::ProxyTrigger) * kFifoSlots;
  TSR_CHECK(context.allocate(ring + 3 * kLine, kind, &p->fifoMemory_));
  auto* base = static_cast<char*>(p->fifoMemory_->data());
  p->fifo_.triggers = reinterpret_cast<device::ProxyTrigger*>(base);
  p->fifo_.head = reinterpret_cast<uint64_t*>(base + ring);
  p->fifo_.tail = reinterpret_cast<uint64_t*>(base + ring + kLine);
  p->fifo_.error = reinterpret_cast<uint64_t*>(base + ring + 2 * kLine);
  p->fifo_.size = kFifoSlots;
  p->fifo_.timeoutNs = static_cast<uint64_t>(p->state_->timeoutSeconds * 1e9);
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  *out = std::move(p);
  return tsrSuccess;
}

ProxyService::~ProxyService() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

uint32_t ProxyService::addChannel(ChannelEntry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (!channels_[i].connection) {
      channels_[i] = std::move(entry);
      return static_cast<uint32_t>(i);
    }
  }
  channels_.push_back(std::move(entry));
  return static_cast<uint32_t>(channels_.size() - 1);
}

void ProxyService::removeChannel(uint32_t channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (channel < channels_.size()) channels_[channel] = ChannelEntry{};
}

Result ProxyService::error(std::string* sentence) const {
  auto code = static_cast<Result>(device::loadAcquire(fifo_.error));
  std::lock_guard<std::mutex> lock(mutex_);
  *sentence = errorSentence_;
  return code;
}

Result ProxyService::execute(const device::ProxyTrigger& trigger) {
  auto op = static_cast<uint32_t>(trigger.control >> 32);
  auto channel = static_cast<uint32_t>(trigger.control);
  ChannelEntry e;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (channel < channels_.size()) e = channels_[channel];
  }
  if (!e.connection)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: proxy trigger names channel %u, which is not open", state_->rank,
                    channel);
  if (op & device::kTriggerPut)
    TSR_CHECK(e.connection->put(*e.remote, trigger.dstOffset, *e.local, trigger.srcOffset,
                                trigger.bytes));
  if (op & device::kTriggerSignal)
    TSR_CHECK(e.connection->atomicAdd(*e.semaphore->remote(), Semaphore::kInboundOffset, 1));
  if (op & device::kTriggerFlush) TSR_CHECK(e.connection->flush());
  return tsrSuccess;
}

void ProxyService::run() {
  ScopedRank scoped(state_->rank);
  uint64_t tail = 0;
  uint32_t idle = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    device::ProxyTrigger* slot = &fifo_.triggers[tail % fifo_.size];
    uint64_t control = device::loadAcquire(&slot->control);
    if (control == 0) {
      // Idle: spin briefly, then yield, then short sleeps (the cap bounds the added latency).
      device::backoff(idle < 2048 ? idle++ : 2048);
      continue;
    }
    idle = 0;
    device::ProxyTrigger t = *slot;
    t.control = control;
    device::storeRelaxed(&slot->control, 0);
    Result r = execute(t);
    if (r != tsrSuccess && device::loadAcquire(fifo_.error) == 0) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        errorSentence_ = lastErrorMessage();
      }
      device::storeRelease(fifo_.error, static_cast<uint64_t>(r));
    }
    ++tail;
    device::storeRelease(fifo_.tail, tail);
  }
}

}  // namespace tessera
