// One kind of transport inside a TransportContext: what it can reach, how it exports local
// memory, and how it connects to a peer. One folder per kind (inproc/ shm/ ucx/ cuda_ipc/ p2p/)
// implements it; the context makes each kind it needs once.
#pragma once

#include <memory>
#include <string>

#include "core/status.hpp"
#include "transport/connection.hpp"
#include "transport/context_state.hpp"
#include "transport/memory.hpp"
#include "transport/types.hpp"

namespace tessera {

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual TransportKind kind() const = 0;
  // Whether this rank can reach `peer` with this transport (placements permitting); else why not.
  virtual bool reaches(int peer, std::string* whyNot) const = 0;
  // What peers need to reach `mem` through this transport. A memory the transport cannot export
  // gets an export with an empty section and a reason (the importer reports it).
  virtual Result exportMemory(const Memory& mem, std::unique_ptr<MemoryExport>* out) = 0;
  // Connecting is pairwise: both ranks call localEndpoint, exchange the blobs (the context does
  // it through the bootstrap), then call connect with the peer's.
  virtual Result localEndpoint(int peer, std::string* blob) = 0;
  virtual Result connect(int peer, const std::string& peerEndpoint,
                         std::shared_ptr<Connection>* out) = 0;

 protected:
  explicit Transport(std::shared_ptr<ContextState> context) : context_(std::move(context)) {}
  std::shared_ptr<ContextState> context_;
};

// Whether `kind` is built into this library; otherwise why not ("UCX was not found at build
// time").
bool transportBuilt(TransportKind kind, std::string* whyNot);

// Factories, one per folder. A kind that is not built fails with tsrInvalidUsage saying why.
Result makeInprocTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out);
Result makeShmTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out);
Result makeUcxTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out);
Result makeCudaIpcTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out);
Result makeP2pTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out);

}  // namespace tessera
