// A semaphore between this rank and one peer (DESIGN.md, "Transport", "Memory ordering"): each
// side has a 64-bit inbound counter in its own registered memory that only the peer adds to.
// signal() adds one to the peer's counter after the data it covers; wait() consumes the next
// signal, polling with acquire, spinning and then parking (src/core/park.hpp) where the peer wakes
// sleepers, until the deadline, then fails with tsrTimeout naming rank, peer and semaphore.
// Counters only grow.
//
// On a mapping connection the peer's counter is mapped and the device handle signals directly
// (a memory semaphore); otherwise signal is the connection's atomicAdd (a port semaphore, whose
// device handle can only wait; its signals go through a port channel's proxy).
//
// A counter block is a 64-byte slot of a slab that the context shares among its semaphores
// (context_semaphore.cpp says why slots are never reused): local() and remote() are the slabs,
// localOffset() and remoteOffset() where the two blocks lie in them.
#pragma once

#include <cstdint>
#include <memory>

#include "core/deadline.hpp"
#include "core/status.hpp"
#include "tessera/device/semaphore_device.hpp"
#include "transport/connection.hpp"
#include "transport/memory.hpp"

namespace tessera {

class ParkSet;

class Semaphore {
 public:
  Semaphore(uint32_t id, std::shared_ptr<Connection> connection, std::shared_ptr<Memory> local,
            size_t localOffset, std::shared_ptr<RemoteMemory> remote, size_t remoteOffset);

  uint32_t id() const { return id_; }
  int peer() const { return connection_->peer(); }
  const std::shared_ptr<Connection>& connection() const { return connection_; }
  // The peer's slab holding its counter block, at remoteOffset(); shared with the peer's other
  // semaphores of this connection.
  const std::shared_ptr<RemoteMemory>& remote() const { return remote_; }
  size_t remoteOffset() const { return remoteOffset_; }
  // This side's slab and where its block lies in it.
  const std::shared_ptr<Memory>& local() const { return local_; }
  size_t localOffset() const { return localOffset_; }
  // Whether the peer's counter is mapped (signal from a kernel is possible).
  bool mapped() const { return remote_->mapped() != nullptr; }

  // Adds one to the peer's counter, ordered after this rank's earlier puts on the connection.
  Result signal();
  // Consumes the next signal; waits at most the context's timeout (or `timeoutSeconds` > 0).
  Result wait(double timeoutSeconds = 0);
  // Consumes a signal if one has arrived.
  bool poll();
  // Signals the peer has sent so far (what the inbound counter holds).
  uint64_t received() const;
  // Signals this side has consumed.
  uint64_t consumed() const;
  // Whether a host thread waiting for this semaphore's next signal may park: the counter is in
  // host memory and the peer signals it from a host thread over a mapping (inproc, shm), which
  // wakes parked waiters. Then *word and *parked are the futex word and flag to park on.
  bool parkable(const uint32_t** word, uint32_t** parked) const;
  // Adds that word to a waiter's set; false where the semaphore is not parkable or the set is
  // full (the waiter must poll).
  bool addParkWord(ParkSet* set) const;

  // Offsets inside a counter block (add remoteOffset() for the peer's counter in remote()).
  static constexpr size_t kInboundOffset = 0;
  static constexpr size_t kExpectedOffset = 8;
  static constexpr size_t kParkedOffset = device::kSemaphoreParkedOffset;
  static constexpr size_t kBytes = 64;  // a block, one slot of a slab

  device::SemaphoreDeviceHandle deviceHandle() const;

 private:
  uint64_t* localWord(size_t offset) const {
    return reinterpret_cast<uint64_t*>(static_cast<char*>(local_->data()) + localOffset_ + offset);
  }
  // In the peer's block through the mapping; null where the connection does not map.
  char* remoteBlock() const {
    return remote_->mapped() ? static_cast<char*>(remote_->mapped()) + remoteOffset_ : nullptr;
  }

  uint32_t id_;
  std::shared_ptr<Connection> connection_;
  std::shared_ptr<Memory> local_;
  size_t localOffset_;
  std::shared_ptr<RemoteMemory> remote_;
  size_t remoteOffset_;
  bool parkable_ = false;
};

}  // namespace tessera
