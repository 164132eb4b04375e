#include "transport/channel.hpp"

#include "transport/context_state.hpp"
#include "transport/proxy.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;
}  // namespace

MemoryChannel::MemoryChannel(std::shared_ptr<Connection> connection,
                             std::shared_ptr<RemoteMemory> remote, std::shared_ptr<Memory> local,
                             std::shared_ptr<Semaphore> semaphore)
    : connection_(std::move(connection)),
      remote_(std::move(remote)),
      local_(std::move(local)),
      semaphore_(std::move(semaphore)) {}

device::MemoryChannelDeviceHandle MemoryChannel::deviceHandle() const {
  device::MemoryChannelDeviceHandle h{};
  h.remote = static_cast<char*>(remote_->mapped());
  h.remoteBytes = remote_->size();
  h.local = static_cast<char*>(local_->data());
  h.localBytes = local_->size();
  h.semaphore = semaphore_->deviceHandle();
  return h;
}

Result MemoryChannel::put(size_t dstOffset, size_t srcOffset, size_t bytes) {
  return connection_->put(*remote_, dstOffset, *local_, srcOffset, bytes);
}

Result MemoryChannel::get(size_t dstOffset, size_t srcOffset, size_t bytes) {
  return connection_->get(*local_, dstOffset, *remote_, srcOffset, bytes);
}

PortChannel::PortChannel(std::shared_ptr<ProxyService> proxy, uint32_t channel,
                         std::shared_ptr<Connection> connection,
                         std::shared_ptr<RemoteMemory> remote, std::shared_ptr<Memory> local,
                         std::shared_ptr<Semaphore> semaphore)
    : proxy_(std::move(proxy)),
      channel_(channel),
      connection_(std::move(connection)),
      remote_(std::move(remote)),
      local_(std::move(local)),
      semaphore_(std::move(semaphore)) {}

PortChannel::~PortChannel() {
  // The channel leaves the proxy's table only after the host triggers queued before this ran
  // (the host FIFO is in order); without a running proxy there is nothing queued to wait for.
  const ContextState& ctx = *connection_->context();
  if (ctx.alive.load(std::memory_order_acquire) &&
      proxy_->hostFifo().push(device::kTriggerClose, channel_, 0, 0, 0) != device::kFifoFailed)
    return;
  proxy_->removeChannel(channel_);
}

device::PortChannelDeviceHandle PortChannel::deviceHandle() const {
  device::PortChannelDeviceHandle h{};
  h.fifo = proxy_->deviceFifo();
  h.channel = channel_;
  h.remoteBytes = remote_->size();
  h.localBytes = local_->size();
  h.semaphore = semaphore_->deviceHandle();
  h.semaphore.remoteInbound = nullptr;  // signals go through the proxy
  return h;
}

device::PortChannelDeviceHandle PortChannel::hostHandle() const {
  device::PortChannelDeviceHandle h = deviceHandle();
  h.fifo = proxy_->hostFifo();
  return h;
}

Result PortChannel::pushFailed(const char* op) {
  const ContextState& ctx = *connection_->context();
  if (ctx.aborted.load(std::memory_order_acquire))
    return TSR_FAIL(tsrRemoteError,
                    "rank %d: port channel %s interrupted: the communicator was "
                    "aborted",
                    ctx.rank, op);
  if (!ctx.alive.load(std::memory_order_acquire))
    return TSR_FAIL(tsrInvalidArgument, "rank %d: port channel %s on a destroyed communicator",
                    ctx.rank, op);
  std::string sentence;
  Result r = proxy_->error(&sentence);
  if (r == tsrSuccess) r = tsrTimeout;
  return TSR_FAIL(r, "rank %d: port channel %s to peer %d over %s failed: %s", ctx.rank, op,
                  connection_->peer(), transportName(connection_->kind()),
                  sentence.empty() ? "the proxy FIFO stayed full or the proxy did not finish "
                                     "before the deadline"
                                   : sentence.c_str());
}

Result PortChannel::put(size_t dstOffset, size_t srcOffset, size_t bytes) {
  if (!remote_->contains(dstOffset, bytes) || !local_->contains(srcOffset, bytes))
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: port channel put of %zu bytes (peer offset %zu of %zu, local offset "
                    "%zu of %zu) does not fit",
                    connection_->rank(), bytes, dstOffset, remote_->size(), srcOffset,
                    local_->size());
  if (!usable()) return pushFailed("put");
  return hostHandle().put(dstOffset, srcOffset, bytes) ? tsrSuccess : pushFailed("put");
}

Result PortChannel::signal() {
  if (!usable()) return pushFailed("signal");
  return hostHandle().signal() ? tsrSuccess : pushFailed("signal");
}

Result PortChannel::putWithSignal(size_t dstOffset, size_t srcOffset, size_t bytes) {
  TSR_CHECK(put(dstOffset, srcOffset, bytes));
  return signal();
}

Result PortChannel::flush() {
  if (!usable()) return pushFailed("flush");
  device::FifoDeviceHandle fifo = proxy_->hostFifo();
  uint64_t slot = fifo.push(device::kTriggerFlush, channel_, 0, 0, 0);
  if (slot == device::kFifoFailed) return pushFailed("flush");
  // Polled here rather than with FifoDeviceHandle::sync, so that abort() interrupts it.
  const ContextState& ctx = *connection_->context();
  Deadline deadline = Deadline::after(ctx.timeoutSeconds);
  for (uint32_t iter = 0;; ++iter) {
    if (device::loadAcquire(fifo.tail) > slot)
      return device::loadAcquire(fifo.error) == 0 ? tsrSuccess : pushFailed("flush");
    if ((iter & 63) == 63 && (ctx.aborted.load() || deadline.expired())) return pushFailed("flush");
    device::backoff(iter);
  }
}

bool PortChannel::usable() const {
  const ContextState& ctx = *connection_->context();
  return ctx.alive.load(std::memory_order_acquire) && !ctx.aborted.load(std::memory_order_acquire);
}

}  // namespace tessera
