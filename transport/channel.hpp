// Channels: what executors use (DESIGN.md, "Transport"). A MemoryChannel joins a mapped peer
// memory, a local memory and a memory semaphore; a PortChannel hands puts and signals to the
// proxy. Both give a device handle (usable unchanged from a kernel or a host thread) and the
// same operations as host calls that return a Result with a sentence.
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.hpp"
#include "tessera/device/memory_channel_device.hpp"
#include "tessera/device/port_channel_device.hpp"
#include "transport/connection.hpp"
#include "transport/memory.hpp"
#include "transport/semaphore.hpp"

namespace tessera {

class ProxyService;

class MemoryChannel {
 public:
  MemoryChannel(std::shared_ptr<Connection> connection, std::shared_ptr<RemoteMemory> remote,
                std::shared_ptr<Memory> local, std::shared_ptr<Semaphore> semaphore);

  device::MemoryChannelDeviceHandle deviceHandle() const;

  // Host calls (host memory only): tsrInvalidArgument when a range does not fit.
  Result put(size_t dstOffset, size_t srcOffset, size_t bytes);
  Result get(size_t dstOffset, size_t srcOffset, size_t bytes);
  Result signal() { return semaphore_->signal(); }
  Result wait(double timeoutSeconds = 0) { return semaphore_->wait(timeoutSeconds); }

  const std::shared_ptr<Connection>& connection() const { return connection_; }

 private:
  std::shared_ptr<Connection> connection_;
  std::shared_ptr<RemoteMemory> remote_;
  std::shared_ptr<Memory> local_;
  std::shared_ptr<Semaphore> semaphore_;
};

class PortChannel {
 public:
  PortChannel(std::shared_ptr<ProxyService> proxy, uint32_t channel,
              std::shared_ptr<Connection> connection, std::shared_ptr<RemoteMemory> remote,
              std::shared_ptr<Memory> local, std::shared_ptr<Semaphore> semaphore);
  ~PortChannel();

  // For kernels (on a host-only context, also usable from host threads).
  device::PortChannelDeviceHandle deviceHandle() const;
  // For host threads: the same channel on the proxy's host FIFO.
  device::PortChannelDeviceHandle hostHandle() const;

  // Host calls through the host FIFO; put/signal return once the trigger is queued, flush once the
  // proxy completed everything before it (and reports the proxy's first error).
  Result put(size_t dstOffset, size_t srcOffset, size_t bytes);
  Result signal();
  Result putWithSignal(size_t dstOffset, size_t srcOffset, size_t bytes);
  Result flush();
  Result wait(double timeoutSeconds = 0) { return semaphore_->wait(timeoutSeconds); }

 private:
  Result pushFailed(const char* op);
  bool usable() const;

  std::shared_ptr<ProxyService> proxy_;
  uint32_t channel_;
  std::shared_ptr<Connection> connection_;
  std::shared_ptr<RemoteMemory> remote_;
  std::shared_ptr<Memory> local_;
  std::shared_ptr<Semaphore> semaphore_;
};

}  // namespace tessera
