// TransportContext's memory: allocation (shareable with every transport it has), registration
// of the caller's memory, and finding the registration of a pointer (context.hpp).
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/context.hpp"
#include "transport/cuda_ipc/cuda_memory.hpp"
#include "transport/host_alloc.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

// A host allocation that other processes can map: a memfd, so no name is ever created in
// /dev/shm and the kernel frees it when the last process that mapped it is gone.
Result allocateMemfd(size_t bytes, void** ptr, int* fd, size_t* mapped) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t len = (bytes + page - 1) / page * page;
  int f = memfd_create("tessera", MFD_CLOEXEC);
  if (f < 0)
    return TSR_FAIL(tsrSystemError, "memfd_create for %zu bytes failed: %s", bytes,
                    std::strerror(errno));
  if (ftruncate(f, static_cast<off_t>(len)) != 0) {
    int e = errno;
    close(f);
    return TSR_FAIL(tsrSystemError, "ftruncate of a %zu-byte memfd failed: %s", len,
                    std::strerror(e));
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(f);
    return TSR_FAIL(tsrSystemError, "mmap of a %zu-byte memfd failed: %s", len, std::strerror(e));
  }
  *ptr = p;
  *fd = f;
  *mapped = len;
  return tsrSuccess;
}

}  // namespace

Result TransportContext::finishMemory(std::shared_ptr<Memory> mem, std::shared_ptr<Memory>* out) {
  mem->context_ = state_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    mem->id_ = nextMemoryId_++;
  }
  // Listed before the exports are made: a transport created meanwhile exports it itself (see
  // transport()), and whichever comes second finds the export there.
  {
    std::lock_guard<std::mutex> lock(state_->memoryMutex);
    auto& list = state_->memories;
    std::erase_if(list, [](const std::weak_ptr<Memory>& w) { return w.expired(); });
    list.push_back(mem);
  }
  std::array<std::shared_ptr<Transport>, kTransportKinds> made;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    made = transports_;
  }
  for (auto& t : made) {
    if (!t) continue;
    size_t k = static_cast<size_t>(t->kind());
    {
      std::lock_guard<std::mutex> lock(state_->memoryMutex);
      if (mem->exports_[k]) continue;
    }
    std::unique_ptr<MemoryExport> e;
    TSR_CHECK(t->exportMemory(*mem, &e));
    std::lock_guard<std::mutex> lock(state_->memoryMutex);
    if (!mem->exports_[k]) mem->exports_[k] = std::move(e);
  }
  *out = std::move(mem);
  return tsrSuccess;
}

Result TransportContext::allocate(size_t bytes, MemoryKind kind, std::shared_ptr<Memory>* out) {
  if (bytes == 0) return TSR_FAIL(tsrInvalidArgument, "allocate of 0 bytes");
  if (!state_->alive.load()) return TSR_FAIL(tsrInvalidArgument, "allocate on a destroyed context");
  std::shared_ptr<Memory> mem(new Memory());
  mem->kind_ = kind;
  mem->size_ = bytes;
  mem->owned_ = true;
  switch (kind) {
    case MemoryKind::kHost:
    case MemoryKind::kCudaPinnedHost: {
      void* p = nullptr;
      int fd = -1;
      size_t len = 0;
      TSR_CHECK(allocateMemfd(bytes, &p, &fd, &len));
      std::function<void()> unpin;
      if (kind == MemoryKind::kCudaPinnedHost) {
        Result r = cudaPinHostMemory(p, len, &unpin, state_->cudaDevice);
        if (r != tsrSuccess) {
          munmap(p, len);
          close(fd);
          return r;
        }
        mem->device_ = state_->cudaDevice;
      }
      mem->ptr_ = p;
      mem->memfd_ = fd;
      mem->release_ = [p, fd, len, unpin] {
        if (unpin) unpin();
        munmap(p, len);
        close(fd);
      };
      break;
    }
    case MemoryKind::kCuda: {
      if (state_->cudaDevice < 0)
        return TSR_FAIL(tsrInvalidUsage,
                        "rank %d: allocate of cuda memory in a context without a GPU",
                        state_->rank);
      CudaAllocation a;
      TSR_CHECK(cudaAllocateShareable(bytes, state_->cudaDevice, &a));
      mem->ptr_ = a.ptr;
      mem->device_ = a.device;
      mem->memfd_ = a.shareableFd;
      mem->release_ = a.release;
      break;
    }
  }
  return finishMemory(std::move(mem), out);
}

Result TransportContext::registerMemory(void* ptr, size_t bytes, MemoryKind kind,
                                        std::shared_ptr<Memory>* out) {
  if (ptr == nullptr || bytes == 0)
    return TSR_FAIL(tsrInvalidArgument, "registerMemory(%p, %zu bytes): null pointer or no bytes",
                    ptr, bytes);
  if (!state_->alive.load())
    return TSR_FAIL(tsrInvalidArgument, "registerMemory on a destroyed context");
  std::shared_ptr<Memory> mem(new Memory());
  mem->ptr_ = ptr;
  mem->size_ = bytes;
  mem->kind_ = kind;
  if (kind == MemoryKind::kCuda) {
    std::string why;
    int dev = -1;
    if (cudaPointerDevice(ptr, &dev, &why) != tsrSuccess || dev < 0)
      return TSR_FAIL(tsrInvalidArgument, "registerMemory(%p) as cuda memory: %s", ptr,
                      why.c_str());
    mem->device_ = dev;
  } else if (kind == MemoryKind::kHost) {
    // Inside a tsrMemAlloc allocation: shareable through its memfd (the shm transport maps it).
    SharedHostRegion region;
    if (sharedHostLookup(ptr, bytes, &region)) {
      int fd = region.fd;
      mem->memfd_ = fd;
      mem->memfdOffset_ =
          static_cast<size_t>(static_cast<char*>(ptr) - static_cast<char*>(region.base));
      mem->release_ = [fd] { close(fd); };
    }
  }
  return finishMemory(std::move(mem), out);
}

Result TransportContext::findMemory(const void* ptr, size_t bytes,
                                    std::shared_ptr<Memory>* out) const {
  *out = findRegisteredMemory(*state_, ptr, bytes);
  if (*out) return tsrSuccess;
  return TSR_FAIL(tsrInvalidArgument,
                  "rank %d: %p (+%zu bytes) lies in no memory registered with this communicator",
                  state_->rank, ptr, bytes);
}

}  // namespace tessera
