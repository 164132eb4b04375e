// The proxy: a host thread per context that carries out port-channel triggers (DESIGN.md,
// "port channel"). Producers push triggers into a FIFO; the thread takes them in order and calls
// the channel's Connection: put, then atomicAdd for a signal (the connection orders it after the
// puts), flush where asked. The first failure is written to the FIFOs' error words and logged;
// every later push and sync reports it.
//
// Idle, the thread waits as host waits do (src/core/park.hpp): it spins for the spin budget, then
// parks on the host FIFO's doorbell, which a host producer rings after its push when the thread
// said it parked (fifo_device.hpp). With a device FIFO it polls instead (a kernel cannot wake it).
//
// Two FIFOs, because host and GPU producers cannot share one claim counter: atomics on mapped
// pinned memory are not atomic between the host and the device. The host FIFO (plain host
// memory) takes host threads' triggers; with a GPU, the device FIFO takes kernels' triggers: its
// slots, tail and error word are in pinned host memory (the proxy reads them), its head in device
// memory (only kernels add to it). Triggers of one FIFO are carried out in order; there is no
// order between the two.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

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
  // Stops the thread (idempotent); triggers pushed afterwards are never carried out, so their
  // producers time out.
  void stop();

  struct ChannelEntry {
    std::shared_ptr<Connection> connection;
    std::shared_ptr<RemoteMemory> remote;
    std::shared_ptr<Memory> local;
    std::shared_ptr<Semaphore> semaphore;
  };
  // Returns the channel's id in the proxy's table (never reused). Triggers of a removed channel
  // fail (and the proxy reports it); PortChannel drains its host triggers before it goes.
  uint32_t addChannel(ChannelEntry entry);
  void removeChannel(uint32_t channel);

  // The FIFO for kernels (the host FIFO when the context has no GPU) and the one for host threads.
  device::FifoDeviceHandle deviceFifo() const { return hasDeviceFifo_ ? deviceFifo_ : hostFifo_; }
  device::FifoDeviceHandle hostFifo() const { return hostFifo_; }
  // The proxy's first error (tsrSuccess while none), with its sentence.
  Result error(std::string* sentence) const;

  // Whether the thread parks on the host FIFO's doorbell when idle (no device FIFO, and
  // TESSERA_WAIT_PARK is not 0); its parks so far, and how many of them ended at their slice's
  // timeout rather than by a producer's ring (tests, diagnostics).
  bool parksWhenIdle() const { return parksWhenIdle_; }
  uint64_t parks() const { return parks_.load(std::memory_order_relaxed); }
  uint64_t parkTimeouts() const { return parkTimeouts_.load(std::memory_order_relaxed); }

 private:
  ProxyService() = default;
  void run();
  // Carries out what is ready in `fifo` (at most a batch); returns whether it did anything.
  bool drain(const device::FifoDeviceHandle& fifo, uint64_t* tail);
  Result execute(const device::ProxyTrigger& trigger);
  void recordError(Result r);

  std::shared_ptr<ContextState> state_;
  std::shared_ptr<Memory> hostFifoMemory_;
  std::shared_ptr<Memory> deviceFifoMemory_;  // slots, tail, error (pinned host)
  std::shared_ptr<Memory> deviceHeadMemory_;  // head (device memory)
  device::FifoDeviceHandle hostFifo_{};
  device::FifoDeviceHandle deviceFifo_{};
  bool hasDeviceFifo_ = false;
  mutable std::mutex mutex_;  // guards channels_ and errorSentence_
  std::unordered_map<uint32_t, ChannelEntry> channels_;
  uint32_t nextChannel_ = 0;
  std::string errorSentence_;
  bool parksWhenIdle_ = false;
  std::atomic<uint64_t> parks_{0};
  std::atomic<uint64_t> parkTimeouts_{0};
  std::atomic<bool> stop_{false};
  std::mutex stopMutex_;
  std::thread thread_;
};

}  // namespace tessera
