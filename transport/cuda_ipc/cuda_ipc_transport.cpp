// cuda_ipc: GPU memory between processes of one host (DESIGN.md, "Transport"). Device memory is
// exported one of two ways, chosen by how it was allocated:
//  - cuMem VMM with a POSIX-FD handle (what TransportContext::allocate makes where supported):
//    the descriptor is offered through this process's FdServer under a random key; the importer
//    fetches it, imports the handle, reserves an address range, maps and enables its GPU.
//  - anything else (cudaMalloc, the user's registered buffers): a legacy IPC handle of the
//    allocation that holds it, plus the offset into that allocation.
// Fabric handles are detected (logged by cuda_memory.cpp) but not exported.
// Host memory is not exported here: it goes through shm. Ranks of one process cannot use this
// transport (cudaIpcOpenMemHandle refuses the process's own handles): they use p2p.
// The connection watches the peer's FdServer, so a dead peer is reported by peerStatus().
// Operations and their ordering are CudaConnection's (cuda_connection.hpp).
#include <unistd.h>

#include <cstring>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/device_guard.hpp"
#include "core/idle_release.hpp"
#include "transport/common/fd_server.hpp"
#include "transport/cuda_ipc/cu_driver.hpp"
#include "transport/cuda_ipc/cuda_connection.hpp"
#include "transport/cuda_ipc/cuda_memory.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

enum SectionType : uint32_t { kVmmFd = 1, kLegacyIpc = 2 };

// Followed by `addressBytes` bytes: the FdServer's address (kVmmFd only).
struct IpcSection {
  uint32_t type;
  int32_t device;
  uint64_t key;          // kVmmFd: the FdServer key of the descriptor
  uint64_t bytes;        // kVmmFd: the mapped size; kLegacyIpc: the allocation's size
  uint64_t granularity;  // kVmmFd: the alignment to reserve with
  uint64_t offset;       // kLegacyIpc: where the memory starts inside the allocation
  cudaIpcMemHandle_t handle;
  uint32_t addressBytes;
  uint32_t reserved;
};

struct IpcExport final : MemoryExport {
  FdServer* server = nullptr;
  uint64_t key = 0;
  ~IpcExport() override {
    if (server != nullptr) server->withdraw(key);
  }
};

struct VmmMapping final : RemoteMapping {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  int device = -1;
  ~VmmMapping() override {
    if (bytes == 0) return;  // nothing was mapped
    // Unmapping may wait for an idle device: held back while a resident grid runs there.
    releaseWhenIdle(device, [ptr = ptr, bytes = bytes, device = device] {
      const CuDriver& d = cuDriver();
      CudaDeviceGuard guard(device);
      CUresult r = d.memUnmap(ptr, bytes);
      if (r == CUDA_SUCCESS) r = d.memAddressFree(ptr, bytes);
      if (r != CUDA_SUCCESS)
        TSR_WARN("unmapping a peer's %zu-byte allocation on device %d: %s", bytes, device,
                 cuErrorText(r).c_str());
    });
  }
};

struct LegacyMapping final : RemoteMapping {
  void* base = nullptr;
  int device = -1;
  ~LegacyMapping() override {
    // Closing may wait for an idle device: held back while a resident grid runs there.
    releaseWhenIdle(device, [base = base, device = device] {
      CudaDeviceGuard guard(device);
      cudaError_t e = cudaIpcCloseMemHandle(base);
      if (e != cudaSuccess)
        TSR_WARN("cudaIpcCloseMemHandle(%p) on device %d: %s", base, device,
                 cudaErrorText(e).c_str());
    });
  }
};

class CudaIpcConnection final : public CudaConnection {
 public:
  CudaIpcConnection(std::shared_ptr<ContextState> context, int peer)
      : CudaConnection(std::move(context), peer, TransportKind::kCudaIpc) {}
  ~CudaIpcConnection() override {
    if (watch_ >= 0) close(watch_);
  }

  Result start(const std::string& peerServer) {
    TSR_CHECK(init());
    Result r = watchFdServer(peerServer, Deadline::after(context()->timeoutSeconds), &watch_);
    if (r != tsrSuccess) return addContext(r, "cuda_ipc connect to peer %d: ", peer());
    return tsrSuccess;
  }

  Result peerStatus() override {
    if (watch_ >= 0 && peerGone(watch_))
      return fail(tsrRemoteError, "the peer process has exited (its descriptor server closed)");
    return tsrSuccess;
  }

 protected:
  Result doImport(const MemoryBlobHeader& header, const std::string& section, void** mapped,
                  std::unique_ptr<RemoteMapping>* mapping) override {
    IpcSection s{};
    if (section.size() < sizeof s)
      return fail(tsrInvalidArgument, "cuda_ipc memory section has %zu bytes, expected %zu+",
                  section.size(), sizeof s);
    std::memcpy(&s, section.data(), sizeof s);
    if (section.size() != sizeof s + s.addressBytes)
      return fail(tsrInvalidArgument, "cuda_ipc memory section has %zu bytes, expected %zu",
                  section.size(), sizeof s + s.addressBytes);
    // The guard's cudaSetDevice initializes the device's primary context and makes it current
    // (CUDA 12 and later, which this build needs), as the cuMem calls below require. Not
    // cudaFree(nullptr), the older idiom: cudaFree synchronizes the device and so never returns
    // while a resident kernel runs (DESIGN.md, "Known hazards").
    CudaDeviceGuard guard(device());
    if (guard.status() != cudaSuccess)
      return fail(tsrUnhandledCudaError, "starting CUDA on device %d: %s", device(),
                  cudaErrorText(guard.status()).c_str());
    if (s.type == kVmmFd) {
      if (s.bytes < header.size || s.granularity == 0 || s.bytes % s.granularity != 0)
        return fail(tsrInvalidArgument,
                    "memory %u: VMM section of %llu bytes (granularity %llu) cannot hold %llu",
                    header.memoryId, static_cast<unsigned long long>(s.bytes),
                    static_cast<unsigned long long>(s.granularity),
                    static_cast<unsigned long long>(header.size));
      return importVmm(header, s, section.substr(sizeof s), mapped, mapping);
    }
    if (s.type == kLegacyIpc) {
      if (s.offset > s.bytes || header.size > s.bytes - s.offset)
        return fail(tsrInvalidArgument,
                    "memory %u: %llu bytes at offset %llu do not fit its %llu-byte allocation",
                    header.memoryId, static_cast<unsigned long long>(header.size),
                    static_cast<unsigned long long>(s.offset),
                    static_cast<unsigned long long>(s.bytes));
      void* base = nullptr;
      cudaError_t e = cudaIpcOpenMemHandle(&base, s.handle, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess)
        return fail(tsrUnhandledCudaError,
                    "cudaIpcOpenMemHandle for memory %u of the peer's device %d on device %d: %s",
                    header.memoryId, s.device, device(), cudaErrorText(e).c_str());
      auto m = std::make_unique<LegacyMapping>();
      m->base = base;
      m->device = device();
      *mapped = static_cast<char*>(base) + s.offset;
      *mapping = std::move(m);
      return tsrSuccess;
    }
    return fail(tsrInvalidArgument, "cuda_ipc memory section of unknown type %u", s.type);
  }

 private:
  Result importVmm(const MemoryBlobHeader& header, const IpcSection& s, const std::string& address,
                   void** mapped, std::unique_ptr<RemoteMapping>* mapping) {
    const CuDriver& d = cuDriver();
    if (!d.vmm)
      return fail(tsrUnhandledCudaError, "memory %u is a VMM allocation, but here %s",
                  header.memoryId, d.why.c_str());
    int fd = -1;
    Result r = fetchFd(address, s.key, Deadline::after(context()->timeoutSeconds), &fd);
    if (r != tsrSuccess)
      return addContext(r, "cuda_ipc rank %d importing memory %u from peer %d: ", rank(),
                        header.memoryId, peer());
    CUmemGenericAllocationHandle handle = 0;
    CUresult cr =
        d.memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);  // the handle holds the allocation now
    if (cr != CUDA_SUCCESS)
      return fail(tsrUnhandledCudaError, "cuMemImportFromShareableHandle for memory %u: %s",
                  header.memoryId, cuErrorText(cr).c_str());
    auto m = std::make_unique<VmmMapping>();
    m->bytes = s.bytes;
    m->device = device();
    const char* step = "cuMemAddressReserve";
    cr = d.memAddressReserve(&m->ptr, s.bytes, s.granularity, 0, 0);
    bool reserved = cr == CUDA_SUCCESS;
    if (reserved) {
      step = "cuMemMap";
      cr = d.memMap(m->ptr, s.bytes, 0, handle, 0);
    }
    // A mapping keeps its own reference. Releasing may wait for an idle device.
    releaseWhenIdle(device(), [&d, handle] { d.memRelease(handle); });
    if (cr == CUDA_SUCCESS) {
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device();
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      step = "cuMemSetAccess";
      cr = d.memSetAccess(m->ptr, s.bytes, &access, 1);
    }
    if (cr != CUDA_SUCCESS) {
      // Undo the mapping; unmapping may wait for an idle device.
      releaseWhenIdle(device(), [&d, ptr = m->ptr, bytes = s.bytes, reserved,
                                 unmap = step == std::string("cuMemSetAccess")] {
        if (unmap) d.memUnmap(ptr, bytes);
        if (reserved) d.memAddressFree(ptr, bytes);
      });
      m->bytes = 0;  // undone above: the destructor must not unmap
      return fail(tsrUnhandledCudaError,
                  "%s for memory %u (%llu bytes of the peer's device %d) on device %d: %s", step,
                  header.memoryId, static_cast<unsigned long long>(s.bytes), s.device, device(),
                  cuErrorText(cr).c_str());
    }
    *mapped = reinterpret_cast<void*>(static_cast<uintptr_t>(m->ptr));
    *mapping = std::move(m);
    return tsrSuccess;
  }

  int watch_ = -1;
};

class CudaIpcTransport final : public Transport {
 public:
  explicit CudaIpcTransport(std::shared_ptr<ContextState> context)
      : Transport(std::move(context)) {}

  TransportKind kind() const override { return TransportKind::kCudaIpc; }

  bool reaches(int peer, std::string* whyNot) const override {
    const auto& p = context_->placements;
    const RankPlacement& me = p[static_cast<size_t>(context_->rank)];
    const RankPlacement& them = p[static_cast<size_t>(peer)];
    Locality l = locality(me, them);
    if (l != Locality::kSameHost) {
      *whyNot = l == Locality::kSameProcess
                    ? "the peer runs in this process (CUDA refuses a process's own IPC handles; "
                      "use p2p)"
                    : "the peer runs on another host";
      return false;
    }
    if (me.cudaDevice < 0 || them.cudaDevice < 0) {
      *whyNot = "both ranks need a GPU";
      return false;
    }
    return true;
  }

  Result exportMemory(const Memory& mem, std::unique_ptr<MemoryExport>* out) override {
    auto e = std::make_unique<IpcExport>();
    if (mem.kind() != MemoryKind::kCuda) {
      e->whyNot = strprintf("cuda_ipc exports device memory only, not %s memory (use shm)",
                            memoryKindName(mem.kind()));
      *out = std::move(e);
      return tsrSuccess;
    }
    IpcSection s{};
    s.device = mem.cudaDevice();
    std::string address;
    size_t bytes = 0, gran = 0;
    if (mem.memfd() >= 0 && cudaVmmAllocationInfo(mem.data(), &bytes, &gran)) {
      FdServer* server = nullptr;
      TSR_CHECK(FdServer::instance(&server));
      TSR_CHECK(server->offer(mem.memfd(), &e->key));
      e->server = server;
      s.type = kVmmFd;
      s.key = e->key;
      s.bytes = bytes;
      s.granularity = gran;
      address = server->address();
    } else {
      s.type = kLegacyIpc;
      std::string why;
      if (!legacyHandle(mem, &s, &why)) {
        e->whyNot = strprintf("memory %u on device %d has no legacy IPC handle: %s", mem.id(),
                              mem.cudaDevice(), why.c_str());
        *out = std::move(e);
        return tsrSuccess;
      }
    }
    s.addressBytes = static_cast<uint32_t>(address.size());
    e->section.assign(reinterpret_cast<const char*>(&s), sizeof s);
    e->section += address;
    *out = std::move(e);
    return tsrSuccess;
  }

  Result localEndpoint(int, std::string* blob) override {
    FdServer* server = nullptr;
    TSR_CHECK(FdServer::instance(&server));
    *blob = server->address();
    return tsrSuccess;
  }

  Result connect(int peer, const std::string& peerEndpoint,
                 std::shared_ptr<Connection>* out) override {
    auto c = std::make_shared<CudaIpcConnection>(context_, peer);
    TSR_CHECK(c->start(peerEndpoint));
    *out = std::move(c);
    return tsrSuccess;
  }

 private:
  // The IPC handle of the allocation that holds `mem` and the offset of mem inside it.
  static bool legacyHandle(const Memory& mem, IpcSection* s, std::string* why) {
    const CuDriver& d = cuDriver();
    if (d.memGetAddressRange == nullptr) {
      *why = "the driver has no cuMemGetAddressRange";
      return false;
    }
    CudaDeviceGuard guard(mem.cudaDevice());
    CUdeviceptr base = 0;
    size_t size = 0;
    auto ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(mem.data()));
    CUresult r = d.memGetAddressRange(&base, &size, ptr);
    if (r != CUDA_SUCCESS) {
      *why = "cuMemGetAddressRange: " + cuErrorText(r);
      return false;
    }
    cudaError_t e =
        cudaIpcGetMemHandle(&s->handle, reinterpret_cast<void*>(static_cast<uintptr_t>(base)));
    if (e != cudaSuccess) {
      *why = "cudaIpcGetMemHandle: " + cudaErrorText(e);
      return false;
    }
    s->offset = ptr - base;
    s->bytes = size;
    return true;
  }
};

}  // namespace

Result makeCudaIpcTransport(std::shared_ptr<ContextState> context,
                            std::unique_ptr<Transport>* out) {
  *out = std::make_unique<CudaIpcTransport>(std::move(context));
  return tsrSuccess;
}

}  // namespace tessera
