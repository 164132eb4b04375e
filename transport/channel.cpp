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

PortChannel::~PortChannel() { proxy_->removeChannel(channel_); }

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
  if (!connection_->context()->alive.load()) return pushFailed("put");
  return hostHandle().put(dstOffset, srcOffset, bytes) ? tsrSuccess : pushFailed("put");
}

Result PortChannel::signal() {
  if (!connection_->context()->alive.load()) return pushFailed("signal");
  return hostHandle().signal() ? tsrSuccess : pushFailed("signal");
}

Result PortChannel::putWithSignal(size_t dstOffset, size_t srcOffset, size_t bytes) {
  TSR_CHECK(put(dstOffset, srcOffset, bytes));
  return signal();
}

Result PortChannel::flush() {
  if (!connection_->context()->alive.load()) return pushFailed("flush");
  return hostHandle().flush() ? tsrSuccess : pushFailed("flush");
}

}  // namespace tessera
