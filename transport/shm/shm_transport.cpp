// shm: host memory shared between processes of one host (DESIGN.md, "Transport").
//
// Memory the context allocated for the host is a memfd (context.cpp): no name in /dev/shm, freed
// by the kernel once the last process that maps it is gone, so a crash leaves nothing behind.
// Exporting offers the memfd to this process's FdServer under a random key; the section carries
// {server address, key, mapped length}. The importer fetches the descriptor (SCM_RIGHTS), maps it
// MAP_SHARED and closes it at once; the mapping alone keeps the pages alive.
//
// Peer death: connect opens a watch on the peer's FdServer; the kernel closes it when the peer
// process dies, and peerStatus() (which semaphore waits poll) turns that into tsrRemoteError.
//
// Memory ordering: both processes map the same physical pages, so this is the same situation as
// threads of one process. put is plain stores (memcpy) into the mapping; signal is a release
// fetch_add on the peer's counter in the mapping (HostMappedConnection); the waiter loads the
// counter with acquire and then reads the data. The GCC __atomic builtins emit what each
// architecture needs: on x86-64 (TSO) plain stores are already ordered and the locked add is a
// full barrier; on aarch64 the release add is an LDADDL (or an LL/SC loop with release) and the
// acquire load an LDAR, which order the data stores before the counter for the other process.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "transport/common/fd_server.hpp"
#include "transport/shm/cross_memory.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

constexpr uint32_t kSectionMagic = 0x54534853;   // "TSHS"
constexpr uint32_t kEndpointMagic = 0x54534845;  // "TSHE"
constexpr size_t kMaxAddress = 100;              // fits sockaddr_un::sun_path after the NUL

// A memory section: this header, then the server address.
struct SectionHeader {
  uint32_t magic;
  uint32_t addressBytes;
  uint64_t key;
  uint64_t mappedBytes;
  uint64_t offset;  // where the memory starts inside the mapping (a registered sub-range)
};
// An endpoint: this header, then the server address.
struct EndpointHeader {
  uint32_t magic;
  uint32_t addressBytes;
  CrossMemoryEndpoint cma;  // for the peer's cross-memory probe
};

template <typename H>
std::string withAddress(const H& h, const std::string& address) {
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += address;
  return out;
}

// Splits "header + address"; false when the sizes do not add up.
template <typename H>
bool splitAddress(const std::string& blob, uint32_t magic, H* h, std::string* address) {
  if (blob.size() < sizeof(H)) return false;
  std::memcpy(h, blob.data(), sizeof(H));
  if (h->magic != magic || h->addressBytes == 0 || h->addressBytes > kMaxAddress ||
      blob.size() != sizeof(H) + h->addressBytes)
    return false;
  address->assign(blob, sizeof(H), h->addressBytes);
  return true;
}

// Withdraws the key when the Memory goes (only in the process that offered it: a forked child
// that inherited the Memory has its own server).
struct ShmExport final : MemoryExport {
  FdServer* server = nullptr;
  uint64_t key = 0;
  pid_t pid = 0;
  ~ShmExport() override {
    if (server != nullptr && pid == getpid()) server->withdraw(key);
  }
};

struct ShmMapping final : RemoteMapping {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~ShmMapping() override {
    if (ptr != nullptr) munmap(ptr, bytes);
  }
};

class ShmConnection final : public HostMappedConnection {
 public:
  ShmConnection(std::shared_ptr<ContextState> context, int peer, std::string peerServer, int watch,
                const CrossMemoryEndpoint& peerCma)
      : HostMappedConnection(std::move(context), peer, TransportKind::kShm),
        peerServer_(std::move(peerServer)),
        watch_(watch) {
    cma_.probe(peerCma);
  }
  ~ShmConnection() override { close(watch_); }

  bool crossMemory(std::string* whyNot) const override { return cma_.usable(whyNot); }
  bool sharesAddressSpace() const override { return cma_.sameProcess(); }

  Result peerStatus() override {
    if (!gone_.load(std::memory_order_acquire)) {
      if (!peerGone(watch_)) return tsrSuccess;
      gone_.store(true, std::memory_order_release);
    }
    return fail(tsrRemoteError, "peer rank %d exited (its fd server closed the connection)",
                peer());
  }

 protected:
  Result doCrossRead(void* dst, uint64_t peerAddress, size_t bytes) override {
    Result r = cma_.read(dst, peerAddress, bytes);
    return r == tsrSuccess ? r : addContext(r, "shm connection rank %d -> peer %d", rank(), peer());
  }
  Result doCrossWrite(uint64_t peerAddress, const void* src, size_t bytes) override {
    Result r = cma_.write(peerAddress, src, bytes);
    return r == tsrSuccess ? r : addContext(r, "shm connection rank %d -> peer %d", rank(), peer());
  }

  Result doImport(const MemoryBlobHeader& header, const std::string& section, void** mapped,
                  std::unique_ptr<RemoteMapping>* mapping) override {
    SectionHeader h{};
    std::string address;
    if (!splitAddress(section, kSectionMagic, &h, &address))
      return fail(tsrInvalidArgument,
                  "memory %u: the shm section (%zu bytes) is malformed (not written by a tessera "
                  "shm transport of this build)",
                  header.memoryId, section.size());
    if (header.kind == MemoryKind::kCuda || h.offset > h.mappedBytes ||
        h.mappedBytes - h.offset < header.size)
      return fail(tsrInvalidArgument,
                  "memory %u: shm section maps %llu bytes (memory at offset %llu) of %s memory of "
                  "%llu bytes",
                  header.memoryId, static_cast<unsigned long long>(h.mappedBytes),
                  static_cast<unsigned long long>(h.offset), memoryKindName(header.kind),
                  static_cast<unsigned long long>(header.size));
    if (address != peerServer_)
      return fail(tsrInvalidArgument,
                  "memory %u is served by %s, not by the peer's fd server %s (a blob of another "
                  "process?)",
                  header.memoryId, address.c_str(), peerServer_.c_str());
    int fd = -1;
    Result r = fetchFd(address, h.key, Deadline::after(context()->timeoutSeconds), &fd);
    if (r != tsrSuccess)
      return addContext(r, "shm connection rank %d -> peer %d: importing memory %u", rank(), peer(),
                        header.memoryId);
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < h.mappedBytes) {
      close(fd);
      return fail(tsrRemoteError,
                  "memory %u: the descriptor from the peer holds %lld bytes, fewer than the %llu "
                  "announced",
                  header.memoryId, static_cast<long long>(st.st_size),
                  static_cast<unsigned long long>(h.mappedBytes));
    }
    void* p = mmap(nullptr, h.mappedBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);  // the mapping keeps the pages
    if (p == MAP_FAILED)
      return fail(tsrSystemError, "memory %u: mmap of %llu shared bytes failed: %s",
                  header.memoryId, static_cast<unsigned long long>(h.mappedBytes),
                  std::strerror(e));
    auto m = std::make_unique<ShmMapping>();
    m->ptr = p;
    m->bytes = h.mappedBytes;
    *mapped = static_cast<char*>(p) + h.offset;
    *mapping = std::move(m);
    return tsrSuccess;
  }

 private:
  std::string peerServer_;
  int watch_;
  std::atomic<bool> gone_{false};
  CrossMemoryPeer cma_;
};

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(std::shared_ptr<ContextState> context) : Transport(std::move(context)) {}

  TransportKind kind() const override { return TransportKind::kShm; }

  bool reaches(int peer, std::string* whyNot) const override {
    const auto& p = context_->placements;
    const RankPlacement& me = p[static_cast<size_t>(context_->rank)];
    const RankPlacement& them = p[static_cast<size_t>(peer)];
    // Same process works too: a memfd can be mapped twice.
    Locality where = locality(me, them);
    if (where == Locality::kOtherHost) {
      *whyNot = "the peer runs on another host";
      return false;
    }
    if (where == Locality::kSameHost && !sameNetNamespace(me, them)) {
      *whyNot =
          "the peer runs in another network namespace, which this process's fd server (an "
          "abstract Unix socket) does not reach";
      return false;
    }
    return true;
  }

  Result exportMemory(const Memory& mem, std::unique_ptr<MemoryExport>* out) override {
    auto e = std::make_unique<ShmExport>();
    if (mem.kind() == MemoryKind::kCuda) {
      e->whyNot =
          "cuda device memory is not host memory; shm maps host memory only (cuda_ipc shares "
          "device memory between processes)";
    } else if (mem.memfd() < 0) {
      e->whyNot =
          "host memory registered from a user pointer cannot be mapped by another process; "
          "allocate it with TransportContext::allocate or tsrMemAlloc";
    } else {
      struct stat st {};
      if (fstat(mem.memfd(), &st) != 0 || static_cast<uint64_t>(st.st_size) < mem.memfdOffset() ||
          static_cast<uint64_t>(st.st_size) - mem.memfdOffset() < mem.size())
        return TSR_FAIL(tsrSystemError,
                        "rank %d: shm export of memory %u: its memfd holds %lld bytes, fewer "
                        "than %zu",
                        context_->rank, mem.id(), static_cast<long long>(st.st_size), mem.size());
      FdServer* server = nullptr;
      TSR_CHECK(FdServer::instance(&server));
      uint64_t key = 0;
      TSR_CHECK(server->offer(mem.memfd(), &key));
      e->server = server;
      e->key = key;
      e->pid = getpid();
      SectionHeader h{kSectionMagic, static_cast<uint32_t>(server->address().size()), key,
                      static_cast<uint64_t>(st.st_size), mem.memfdOffset()};
      e->section = withAddress(h, server->address());
    }
    *out = std::move(e);
    return tsrSuccess;
  }

  Result localEndpoint(int, std::string* blob) override {
    FdServer* server = nullptr;
    TSR_CHECK(FdServer::instance(&server));
    EndpointHeader h{kEndpointMagic, static_cast<uint32_t>(server->address().size()),
                     crossMemoryEndpoint()};
    *blob = withAddress(h, server->address());
    return tsrSuccess;
  }

  Result connect(int peer, const std::string& peerEndpoint,
                 std::shared_ptr<Connection>* out) override {
    EndpointHeader h{};
    std::string address;
    if (!splitAddress(peerEndpoint, kEndpointMagic, &h, &address))
      return TSR_FAIL(tsrInternalError, "rank %d: shm endpoint of peer %d (%zu bytes) is malformed",
                      context_->rank, peer, peerEndpoint.size());
    int watch = -1;
    Result r = watchFdServer(address, Deadline::after(context_->timeoutSeconds), &watch);
    if (r != tsrSuccess)
      return addContext(r, "rank %d: shm connect to peer %d", context_->rank, peer);
    *out = std::make_shared<ShmConnection>(context_, peer, std::move(address), watch, h.cma);
    return tsrSuccess;
  }
};

}  // namespace

Result makeShmTransport(std::shared_ptr<ContextState> context, std::unique_ptr<Transport>* out) {
  *out = std::make_unique<ShmTransport>(std::move(context));
  return tsrSuccess;
}

}  // namespace tessera
