// p2p: GPUs of one process (DESIGN.md, "Transport"). Every rank shares the address space, so a
// peer's memory is reached at its own address once this rank's GPU may access the peer's:
// connect enables peer access (nothing for two ranks on one GPU); VMM allocations already
// granted access to every device that can reach them (cuda_memory.cpp). Operations and their
// ordering are CudaConnection's (cuda_connection.hpp).
#include <cstring>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/device_guard.hpp"
#include "transport/cuda_ipc/cuda_connection.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

struct P2pSection {
  uint64_t processNonce;
  uint64_t address;
  int32_t device;
  uint32_t reserved;
};

struct P2pEndpoint {
  uint64_t processNonce;
  int32_t device;
  uint32_t reserved;
};

// Whether `from` can load and store `to`'s memory (the same device trivially can).
bool canAccess(int from, int to, std::string* why) {
  if (from == to) return true;
  int can = 0;
  cudaError_t e = cudaDeviceCanAccessPeer(&can, from, to);
  if (e != cudaSuccess) {
    *why = strprintf("cudaDeviceCanAccessPeer(%d, %d): %s", from, to, cudaErrorText(e).c_str());
    return false;
  }
  if (!can) *why = strprintf("GPU %d cannot access GPU %d as a peer", from, to);
  return can != 0;
}

class P2pConnection final : public CudaConnection {
 public:
  P2pConnection(std::shared_ptr<ContextState> context, int peer)
      : CudaConnection(std::move(context), peer, TransportKind::kP2p) {}

  Result start(int peerDevice) {
    TSR_CHECK(init());
    if (peerDevice == device()) return tsrSuccess;
    std::string why;
    if (!canAccess(device(), peerDevice, &why)) return fail(tsrInvalidUsage, "%s", why.c_str());
    CudaDeviceGuard guard(device());
    cudaError_t e = cudaDeviceEnablePeerAccess(peerDevice, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // another connection of this process enabled it first
    } else if (e != cudaSuccess) {
      return fail(tsrUnhandledCudaError, "cudaDeviceEnablePeerAccess(%d) on device %d: %s",
                  peerDevice, device(), cudaErrorText(e).c_str());
    }
    return tsrSuccess;
  }

 protected:
  Result doImport(const MemoryBlobHeader& header, const std::string& section, void** mapped,
                  std::unique_ptr<RemoteMapping>*) override {
    P2pSection s{};
    if (section.size() != sizeof s)
      return fail(tsrInvalidArgument, "p2p memory section has %zu bytes, expected %zu",
                  section.size(), sizeof s);
    std::memcpy(&s, section.data(), sizeof s);
    uint64_t mine = context()->placements[static_cast<size_t>(context()->rank)].processNonce;
    if (s.processNonce != mine)
      return fail(tsrInvalidArgument, "p2p memory %u comes from another process", header.memoryId);
    *mapped = reinterpret_cast<void*>(static_cast<uintptr_t>(s.address));
    return tsrSuccess;
  }
};

class P2pTransport final : public Transport {
 public:
  explicit P2pTransport(std::shared_ptr<ContextState> context) : Transport(std::move(context)) {}

  TransportKind kind() const override { return TransportKind::kP2p; }

  bool reaches(int peer, std::string* whyNot) const override {
    const auto& p = context_->placements;
    const RankPlacement& me = p[static_cast<size_t>(context_->rank)];
    const RankPlacement& them = p[static_cast<size_t>(peer)];
    if (locality(me, them) != Locality::kSameProcess) {
      *whyNot = "the peer runs in another process (use cuda_ipc)";
      return false;
    }
    if (me.cudaDevice < 0 || them.cudaDevice < 0) {
      *whyNot = "both ranks need a GPU";
      return false;
    }
    return canAccess(me.cudaDevice, them.cudaDevice, whyNot);
  }

  Result exportMemory(const Memory& mem, std::unique_ptr<MemoryExport>* out) override {
    auto e = std::make_unique<MemoryExport>();
    if (mem.kind() == MemoryKind::kHost) {
      e->whyNot = "p2p exports GPU-reachable memory; pageable host memory is not (use inproc)";
    } else {
      P2pSection s{context_->placements[static_cast<size_t>(context_->rank)].processNonce,
                   reinterpret_cast<uintptr_t>(mem.data()), mem.cudaDevice(), 0};
      e->section.assign(reinterpret_cast<const char*>(&s), sizeof s);
    }
    *out = std::move(e);
    return tsrSuccess;
  }

  Result localEndpoint(int, std::string* blob) override {
    P2pEndpoint ep{context_->placements[static_cast<size_t>(context_->rank)].processNonce,
                   context_->cudaDevice, 0};
    blob->assign(reinterpret_cast<const char*>(&ep), sizeof ep);
    return tsrSuccess;
  }

  Result connect(int peer, const std::string& peerEndpoint,
                 std::shared_ptr<Connection>* out) override {
    P2pEndpoint ep{};
    if (peerEndpoint.size() != sizeof ep)
      return TSR_FAIL(tsrInternalError, "rank %d: p2p endpoint of peer %d has %zu bytes, not %zu",
                      context_->rank, peer, peerEndpoint.size(), sizeof ep);
    std::memcpy(&ep, peerEndpoint.data(), sizeof ep);
    if (ep.processNonce != context_->placements[static_cast<size_t>(context_->rank)].processNonce)
      return TSR_FAIL(tsrInvalidUsage, "rank %d: p2p peer %d runs in another process",
                      context_->rank, peer);
    auto c = std::make_shared<P2pConnection>(context_, peer);
    TSR_CHECK(c->start(ep.device));
    *out = std::move(c);
    return tsrSuccess;
  }
};

}  // namespace

Result makeP2pTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out) {
  *out = std::make_unique<P2pTransport>(std::move(context));
  return tsrSuccess;
}

}  // namespace tessera
