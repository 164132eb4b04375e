// The proxy: a host thread per context that carries out port-channel triggers (DESIGN.md,
// "port channel"). Producers (kernels or host threads) push triggers into a FIFO in memory both
// reach (pinned host memory when the context has a GPU); the thread takes them in order and
// calls the channel's Connection: put, then atomicAdd for a signal (the connection orders it
// after the puts), flush where asked. The first failure is written to the FIFO's error word and
// logged; every later push and sync reports it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.hpp"
#include "tessera/device/fifo_device.hpp"
#include "transport/connection.hpp"
#include "transport/memory.hpp"
#include "transport/semaphore.hpp"

namespace tessera {

class TransportContext;

class ProxyService {
 public:
  static constexpr uint32_t kFifoSlots = 512;

  static Result create(TransportContext& context, std::unique_ptr<ProxyService>* out);
  ~ProxyService();  // stops the thread

  struct ChannelEntry {
    std::shared_ptr<Connection> connection;
    std::shared_ptr<RemoteMemory> remote;
    std::shared_ptr<Memory> local;
    std::shared_ptr<Semaphore> semaphore;
  };
  // Returns the channel's index in the proxy's table.
  uint32_t addChannel(ChannelEntry entry);
  void removeChannel(uint32_t channel);

  device::FifoDeviceHandle fifo() const { return fifo_; }
  // The proxy's first error (tsrSuccess while none), with its sentence.
  Result error(std::string* sentence) const;

 private:
  ProxyService() = default;
  void run();
  Result execute(const device::ProxyTrigger& trigger);

  std::shared_ptr<ContextState> state_;
  std::shared_ptr<Memory> fifoMemory_;
  device::FifoDeviceHandle fifo_{};
  mutable std::mutex mutex_;  // guards channels_ and errorSentence_
  std::vector<ChannelEntry> channels_;
  std::string errorSentence_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera
