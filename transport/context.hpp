// TransportContext: one rank's view of the transport layer for one communicator. It makes the
// transports the rank needs, registers memory, connects to peers (picking the transport per pair
// of ranks, see select.hpp), and makes semaphores and channels. Collectives and fused kernels use
// it and never name a concrete transport.
//
// create, connect, exchangeMemory and the semaphore/channel factories are pairwise or
// collective: the ranks involved call them in the same order. They talk through the bootstrap
// (tags at kTransportTagBase and above).
//
// Destroying the context (or abort()) makes every Memory, Connection, Semaphore and channel it
// made fail with tsrInvalidArgument (tsrRemoteError after abort) instead of touching freed state.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "core/status.hpp"
#include "topology/path_class.hpp"
#include "topology/placement.hpp"
#include "transport/connection.hpp"
#include "transport/context_state.hpp"
#include "transport/memory.hpp"
#include "transport/types.hpp"

namespace tessera {

class Transport;
class Semaphore;
class ProxyService;
class MemoryChannel;
class PortChannel;

// Bootstrap tags of the transport layer: kTransportTagBase + (user tag << 4) + purpose.
inline constexpr int kTransportTagBase = 1 << 28;
enum class TransportTagPurpose : int { kConnect = 0, kMemory = 1, kSemaphore = 2 };
inline constexpr int kMaxTransportUserTag = (1 << 23) - 1;
inline int transportTag(int userTag, TransportTagPurpose purpose) {
  return kTransportTagBase + (userTag << 4) + static_cast<int>(purpose);
}

struct TransportContextOptions {
  Bootstrap* bootstrap = nullptr;  // required; must outlive the context
  // Where each rank lives, indexed by rank; empty: create() gathers them (localPlacement).
  std::vector<RankPlacement> placements;
  int cudaDevice = -1;  // this rank's GPU, -1 for host ranks
  // Seconds any wait may take; <= 0: TESSERA_TRANSPORT_TIMEOUT.
  double timeoutSeconds = 0;
  // Path class between this rank's GPU and a peer's (for TESSERA_P2P_LEVEL); empty: computed
  // from the placements and this host's topology.
  std::function<Result(int peer, PathClass*)> pathClass;
};

class TransportContext {
 public:
  // Collective over options.bootstrap.
  static Result create(const TransportContextOptions& options,
                       std::unique_ptr<TransportContext>* out);
  ~TransportContext();
  TransportContext(const TransportContext&) = delete;
  TransportContext& operator=(const TransportContext&) = delete;

  int rank() const { return state_->rank; }
  int nranks() const { return state_->nranks; }
  double timeoutSeconds() const { return state_->timeoutSeconds; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  const std::shared_ptr<ContextState>& state() const { return state_; }

  // Memory the context allocates (shareable with peers of every transport it has).
  Result allocate(size_t bytes, MemoryKind kind, std::shared_ptr<Memory>* out);
  // Registers the caller's memory (it stays the caller's to free, after the Memory is gone).
  Result registerMemory(void* ptr, size_t bytes, MemoryKind kind, std::shared_ptr<Memory>* out);
  // The registered Memory holding [ptr, ptr + bytes); tsrInvalidArgument when there is none.
  Result findMemory(const void* ptr, size_t bytes, std::shared_ptr<Memory>* out) const;

  // The transport for `peer` (see select.hpp), with a sentence saying why.
  Result selectTransport(int peer, TransportKind* out, std::string* why) const;
  // Pairwise: both ranks call it. `kind` forces a transport (both must force the same).
  Result connect(int peer, std::shared_ptr<Connection>* out, int tag = 0);
  Result connect(int peer, TransportKind kind, std::shared_ptr<Connection>* out, int tag = 0);

  // Pairwise over the connection's peer: sends `mine` and imports the peer's.
  Result exchangeMemory(Connection& connection, const Memory& mine,
                        std::shared_ptr<RemoteMemory>* theirs, int tag = 0);

  // Pairwise: a semaphore between this rank and the connection's peer. Its counter is a slot of a
  // slab the context shares among its semaphores (context_semaphore.cpp), so semaphores cost no
  // descriptor or import each.
  Result createSemaphore(const std::shared_ptr<Connection>& connection,
                         std::shared_ptr<Semaphore>* out, int tag = 0);
  // Local (no communication): a channel over memory both ranks already exchanged.
  Result createMemoryChannel(const std::shared_ptr<Connection>& connection,
                             const std::shared_ptr<RemoteMemory>& remote,
                             const std::shared_ptr<Memory>& local,
                             const std::shared_ptr<Semaphore>& semaphore,
                             std::unique_ptr<MemoryChannel>* out);
  Result createPortChannel(const std::shared_ptr<Connection>& connection,
                           const std::shared_ptr<RemoteMemory>& remote,
                           const std::shared_ptr<Memory>& local,
                           const std::shared_ptr<Semaphore>& semaphore,
                           std::unique_ptr<PortChannel>* out);

  // The proxy that drives port channels (started on first use).
  Result proxy(std::shared_ptr<ProxyService>* out);

  // Every later call of this context's objects fails; waits in progress return tsrRemoteError.
  void abort();

  // The transport of `kind`, made on first use.
  Result transport(TransportKind kind, Transport** out);

 private:
  TransportContext() = default;
  Result finishMemory(std::shared_ptr<Memory> mem, std::shared_ptr<Memory>* out);
  // A fresh 64-byte slot for a semaphore's counter block: the slab holding it and its offset.
  Result takeSemaphoreSlot(MemoryKind kind, std::shared_ptr<Memory>* slab, size_t* offset);

  std::shared_ptr<ContextState> state_;
  Bootstrap* bootstrap_ = nullptr;
  std::function<Result(int, PathClass*)> pathClass_;
  mutable std::mutex mutex_;
  std::array<std::shared_ptr<Transport>, kTransportKinds> transports_;
  uint32_t nextMemoryId_ = 1;
  uint32_t nextSemaphoreId_ = 1;
  // The slab of each memory kind that semaphore slots are taken from, and its next free slot.
  // Earlier slabs are held only by their semaphores (context_semaphore.cpp).
  struct SemaphoreSlab {
    std::shared_ptr<Memory> memory;
    size_t next = 0;
  };
  std::mutex slabMutex_;  // not mutex_: a new slab is allocated under it (which takes mutex_)
  std::array<SemaphoreSlab, 3> slabs_;  // by MemoryKind
  std::mutex proxyMutex_;  // not mutex_: the proxy allocates memory (which takes mutex_)
  std::shared_ptr<ProxyService> proxy_;  // port channels share it; stopped with the context
};

}  // namespace tessera
