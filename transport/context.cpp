// TransportContext (context.hpp): creation, transports, selection, connecting, and the channel
// factories. Memory is in context_memory.cpp, semaphores in context_semaphore.cpp.
#include "transport/context.hpp"

#include <cstring>

#include "core/cuda_driver.hpp"
#include "core/env.hpp"
#include "core/hash.hpp"
#include "topology/rank_path.hpp"
#include "transport/channel.hpp"
#include "transport/proxy.hpp"
#include "transport/select.hpp"
#include "transport/semaphore.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

struct ConnectHello {
  uint32_t magic;
  uint8_t kind;
  uint8_t reserved[3];
  uint64_t contextId;
  uint64_t endpointBytes;
};
constexpr uint32_t kHelloMagic = 0x54534331;  // "TSC1"
constexpr uint64_t kMaxEndpointBytes = 1 << 20;

}  // namespace

Result TransportContext::create(const TransportContextOptions& options,
                                std::unique_ptr<TransportContext>* out) {
  if (options.bootstrap == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "TransportContext::create needs a bootstrap");
  Bootstrap& b = *options.bootstrap;
  auto state = std::make_shared<ContextState>();
  state->rank = b.rank();
  state->nranks = b.nranks();
  state->cudaDevice = options.cudaDevice;
  state->timeoutSeconds = options.timeoutSeconds;
  if (state->timeoutSeconds <= 0)
    TSR_CHECK(envDouble("TESSERA_TRANSPORT_TIMEOUT", &state->timeoutSeconds));
  SelectInput probe;
  TSR_CHECK(readSelectEnv(&probe));  // a bad TESSERA_TRANSPORT fails here, before any exchange

  if (!options.placements.empty()) {
    if (options.placements.size() != static_cast<size_t>(state->nranks))
      return TSR_FAIL(tsrInvalidArgument,
                      "TransportContext::create got %zu placements for %d ranks",
                      options.placements.size(), state->nranks);
    state->placements = options.placements;
  } else {
    std::string busId;
    if (options.cudaDevice >= 0) {
      CudaDeviceInfo info;
      TSR_CHECK(cudaGetDeviceInfo(options.cudaDevice, &info));
      busId = info.busId;
    }
    state->placements.resize(static_cast<size_t>(state->nranks));
    TSR_CHECK(localPlacement(options.cudaDevice, busId.c_str(),
                             &state->placements[static_cast<size_t>(state->rank)]));
    TSR_CHECK(b.allGather(state->placements.data(), sizeof(RankPlacement)));
  }
  // One random id per context, from rank 0: blobs of another communicator are told apart.
  uint64_t id = state->rank == 0 ? (randomNonce64() | 1) : 0;
  TSR_CHECK(b.broadcast(&id, sizeof id, 0));
  state->contextId = id;

  std::unique_ptr<TransportContext> ctx(new TransportContext());
  ctx->state_ = std::move(state);
  ctx->bootstrap_ = options.bootstrap;
  ctx->pathClass_ = options.pathClass;
  *out = std::move(ctx);
  return tsrSuccess;
}

TransportContext::~TransportContext() {
  if (proxy_) proxy_->stop();  // port channels may keep the object, never the thread
  proxy_.reset();
  {
    // Slabs whose semaphores are all gone go now, while their transports still exist.
    std::lock_guard<std::mutex> lock(slabMutex_);
    for (auto& s : slabs_) s.memory.reset();
  }
  state_->alive.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& t : transports_) t.reset();
}

void TransportContext::abort() { state_->aborted.store(true, std::memory_order_release); }

Result TransportContext::transport(TransportKind kind, Transport** out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = transports_[static_cast<size_t>(kind)];
  if (!slot) {
    std::unique_ptr<Transport> t;
    switch (kind) {
      case TransportKind::kInproc: TSR_CHECK(makeInprocTransport(state_, &t)); break;
      case TransportKind::kShm: TSR_CHECK(makeShmTransport(state_, &t)); break;
      case TransportKind::kUcx: TSR_CHECK(makeUcxTransport(state_, &t)); break;
      case TransportKind::kCudaIpc: TSR_CHECK(makeCudaIpcTransport(state_, &t)); break;
      case TransportKind::kP2p: TSR_CHECK(makeP2pTransport(state_, &t)); break;
    }
    // Memory registered before this transport existed gets its export now.
    std::vector<std::shared_ptr<Memory>> live;
    {
      std::lock_guard<std::mutex> mlock(state_->memoryMutex);
      for (auto& w : state_->memories)
        if (auto m = w.lock()) live.push_back(std::move(m));
    }
    for (auto& m : live) {
      std::unique_ptr<MemoryExport> e;
      TSR_CHECK(t->exportMemory(*m, &e));
      std::lock_guard<std::mutex> mlock(state_->memoryMutex);
      if (!m->exports_[static_cast<size_t>(kind)])
        m->exports_[static_cast<size_t>(kind)] = std::move(e);
    }
    slot = std::move(t);
  }
  *out = slot.get();
  return tsrSuccess;
}

Result TransportContext::selectTransport(int peer, TransportKind* out, std::string* why) const {
  if (peer < 0 || peer >= state_->nranks)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: peer %d is not a rank of %d", state_->rank, peer,
                    state_->nranks);
  SelectInput in;
  TSR_CHECK(readSelectEnv(&in));
  const RankPlacement& me = state_->placements[static_cast<size_t>(state_->rank)];
  const RankPlacement& them = state_->placements[static_cast<size_t>(peer)];
  in.locality = locality(me, them);
  in.sameNetNs = sameNetNamespace(me, them);
  in.gpuRanks = me.cudaDevice >= 0 && them.cudaDevice >= 0;
  if (in.gpuRanks && in.locality != Locality::kOtherHost) {
    if (pathClass_) {
      TSR_CHECK(pathClass_(peer, &in.gpuPath));
    } else {
      std::shared_ptr<const Topology> topo;
      TSR_CHECK(processTopology(&topo));
      TSR_CHECK(rankPathClass(*topo, me, them, &in.gpuPath));
    }
  }
  for (int k = 0; k < kTransportKinds; ++k) {
    std::string unused;
    in.built[k] = transportBuilt(static_cast<TransportKind>(k), &unused);
  }
  Result r = selectTransportFor(in, out, why);
  if (r != tsrSuccess) return addContext(r, "rank %d -> peer %d", state_->rank, peer);
  return tsrSuccess;
}

Result TransportContext::connect(int peer, std::shared_ptr<Connection>* out, int tag) {
  TransportKind kind;
  std::string why;
  TSR_CHECK(selectTransport(peer, &kind, &why));
  TSR_INFO("rank %d -> peer %d: %s", state_->rank, peer, why.c_str());
  return connect(peer, kind, out, tag);
}

Result TransportContext::connect(int peer, TransportKind kind, std::shared_ptr<Connection>* out,
                                 int tag) {
  if (peer < 0 || peer >= state_->nranks)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: connect to peer %d, not a rank of %d",
                    state_->rank, peer, state_->nranks);
  if (tag < 0 || tag > kMaxTransportUserTag)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: connect tag %d outside 0..%d", state_->rank, tag,
                    kMaxTransportUserTag);
  if (!state_->alive.load()) return TSR_FAIL(tsrInvalidArgument, "connect on a destroyed context");
  Transport* t = nullptr;
  TSR_CHECK(transport(kind, &t));
  std::string whyNot;
  if (!t->reaches(peer, &whyNot))
    return TSR_FAIL(tsrInvalidUsage, "rank %d: %s cannot reach peer %d: %s", state_->rank,
                    transportName(kind), peer, whyNot.c_str());
  std::string mine;
  TSR_CHECK(t->localEndpoint(peer, &mine));
  ConnectHello hello{};
  hello.magic = kHelloMagic;
  hello.kind = static_cast<uint8_t>(kind);
  hello.contextId = state_->contextId;
  hello.endpointBytes = mine.size();
  Bootstrap& b = *bootstrap_;
  int wireTag = transportTag(tag, TransportTagPurpose::kConnect);
  TSR_CHECK(b.send(peer, wireTag, &hello, sizeof hello));
  if (!mine.empty()) TSR_CHECK(b.send(peer, wireTag, mine.data(), mine.size()));
  ConnectHello theirs{};
  TSR_CHECK(b.recv(peer, wireTag, &theirs, sizeof theirs));
  if (theirs.magic != kHelloMagic || theirs.contextId != state_->contextId ||
      theirs.endpointBytes > kMaxEndpointBytes)
    return TSR_FAIL(tsrInternalError, "rank %d: connect hello from peer %d is malformed",
                    state_->rank, peer);
  std::string peerEndpoint(theirs.endpointBytes, '\0');
  if (theirs.endpointBytes > 0)
    TSR_CHECK(b.recv(peer, wireTag, peerEndpoint.data(), peerEndpoint.size()));
  if (theirs.kind != hello.kind)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d picked transport %s for peer %d, but the peer picked %s (is "
                    "TESSERA_TRANSPORT the same on both?)",
                    state_->rank, transportName(kind), peer,
                    theirs.kind < kTransportKinds
                        ? transportName(static_cast<TransportKind>(theirs.kind))
                        : "unknown");
  TSR_CHECK(t->connect(peer, peerEndpoint, out));
  const RankPlacement& me = state_->placements[static_cast<size_t>(state_->rank)];
  const RankPlacement& them = state_->placements[static_cast<size_t>(peer)];
  TSR_INFO("rank %d -> peer %d: connected over %s (%s%s)", state_->rank, peer, transportName(kind),
           localityName(locality(me, them)),
           sameNetNamespace(me, them) ? "" : ", other network namespace");
  return tsrSuccess;
}

Result TransportContext::exchangeMemory(Connection& connection, const Memory& mine,
                                        std::shared_ptr<RemoteMemory>* theirs, int tag) {
  if (tag < 0 || tag > kMaxTransportUserTag)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: exchangeMemory tag %d outside 0..%d",
                    state_->rank, tag, kMaxTransportUserTag);
  std::string blob;
  TSR_CHECK(mine.serialize(&blob));
  Bootstrap& b = *bootstrap_;
  int peer = connection.peer();
  int wireTag = transportTag(tag, TransportTagPurpose::kMemory);
  uint64_t len = blob.size();
  TSR_CHECK(b.send(peer, wireTag, &len, sizeof len));
  TSR_CHECK(b.send(peer, wireTag, blob.data(), blob.size()));
  uint64_t peerLen = 0;
  TSR_CHECK(b.recv(peer, wireTag, &peerLen, sizeof peerLen));
  if (peerLen > (1u << 20))
    return TSR_FAIL(tsrInternalError, "rank %d: peer %d announced a %llu-byte memory blob",
                    state_->rank, peer, static_cast<unsigned long long>(peerLen));
  std::string peerBlob(peerLen, '\0');
  TSR_CHECK(b.recv(peer, wireTag, peerBlob.data(), peerBlob.size()));
  return connection.importMemory(peerBlob, theirs);
}

Result TransportContext::createMemoryChannel(const std::shared_ptr<Connection>& connection,
                                             const std::shared_ptr<RemoteMemory>& remote,
                                             const std::shared_ptr<Memory>& local,
                                             const std::shared_ptr<Semaphore>& semaphore,
                                             std::unique_ptr<MemoryChannel>* out) {
  if (!connection || !remote || !local || !semaphore)
    return TSR_FAIL(tsrInvalidArgument, "createMemoryChannel with a null argument");
  if (!connection->mapsMemory() || remote->mapped() == nullptr || !semaphore->mapped())
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: a memory channel to peer %d needs a mapping transport; %s does not "
                    "map (use a port channel)",
                    state_->rank, connection->peer(), transportName(connection->kind()));
  if (remote->importer() != connection->id() || semaphore->connection() != connection ||
      local->context() != state_)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: createMemoryChannel with memory or a semaphore of another "
                    "connection or communicator",
                    state_->rank);
  *out = std::make_unique<MemoryChannel>(connection, remote, local, semaphore);
  return tsrSuccess;
}

Result TransportContext::createPortChannel(const std::shared_ptr<Connection>& connection,
                                           const std::shared_ptr<RemoteMemory>& remote,
                                           const std::shared_ptr<Memory>& local,
                                           const std::shared_ptr<Semaphore>& semaphore,
                                           std::unique_ptr<PortChannel>* out) {
  if (!connection || !remote || !local || !semaphore)
    return TSR_FAIL(tsrInvalidArgument, "createPortChannel with a null argument");
  if (remote->importer() != connection->id() || semaphore->connection() != connection ||
      local->context() != state_)
    return TSR_FAIL(tsrInvalidArgument,
                    "rank %d: createPortChannel with memory or a semaphore of another "
                    "connection or communicator",
                    state_->rank);
  std::shared_ptr<ProxyService> p;
  TSR_CHECK(proxy(&p));
  uint32_t channel = p->addChannel({connection, remote, local, semaphore});
  *out = std::make_unique<PortChannel>(std::move(p), channel, connection, remote, local, semaphore);
  return tsrSuccess;
}

Result TransportContext::proxy(std::shared_ptr<ProxyService>* out) {
  std::lock_guard<std::mutex> lock(proxyMutex_);
  if (!proxy_) {
    std::unique_ptr<ProxyService> p;
    TSR_CHECK(ProxyService::create(*this, &p));
    proxy_ = std::move(p);
  }
  *out = proxy_;
  return tsrSuccess;
}

}  // namespace tessera
