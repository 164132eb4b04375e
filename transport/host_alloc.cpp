// Shareable host allocations (host_alloc.hpp): one memfd each, kept in a process-wide table.
#include "transport/host_alloc.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kAlloc;

struct Allocation {
  size_t bytes;
  int fd;
};

// Keyed by start address; lookups find the allocation at or below a pointer.
std::mutex& tableMutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, Allocation>& table() {
  static auto* t = new std::map<uintptr_t, Allocation>();  // never destroyed: used at exit
  return *t;
}

}  // namespace

Result sharedHostAlloc(size_t bytes, void** ptr) {
  if (ptr == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (bytes == 0) return TSR_FAIL(tsrInvalidArgument, "tsrMemAlloc: size is 0");
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page)
    return TSR_FAIL(tsrInvalidArgument, "tsrMemAlloc: size %zu is too large", bytes);
  size_t len = (bytes + page - 1) / page * page;
  int fd = memfd_create("tessera-user", MFD_CLOEXEC);
  if (fd < 0)
    return TSR_FAIL(tsrSystemError, "tsrMemAlloc(%zu): memfd_create failed: %s", bytes,
                    std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    int e = errno;
    close(fd);
    return TSR_FAIL(tsrSystemError, "tsrMemAlloc(%zu): ftruncate failed: %s", bytes,
                    std::strerror(e));
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return TSR_FAIL(tsrSystemError, "tsrMemAlloc(%zu): mmap failed: %s", bytes, std::strerror(e));
  }
  {
    std::lock_guard<std::mutex> lock(tableMutex());
    table()[reinterpret_cast<uintptr_t>(p)] = Allocation{len, fd};
  }
  *ptr = p;
  return tsrSuccess;
}

Result sharedHostFree(void* ptr) {
  if (ptr == nullptr) return tsrSuccess;  // as free(NULL)
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(tableMutex());
    auto it = table().find(reinterpret_cast<uintptr_t>(ptr));
    if (it == table().end())
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrMemFree(%p): not the start of memory from tsrMemAlloc (or freed twice)",
                      ptr);
    a = it->second;
    table().erase(it);
  }
  munmap(ptr, a.bytes);
  close(a.fd);
  return tsrSuccess;
}

bool sharedHostLookup(const void* ptr, size_t bytes, SharedHostRegion* out) {
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(tableMutex());
  auto& t = table();
  auto it = t.upper_bound(p);
  if (it == t.begin()) return false;
  --it;
  uintptr_t base = it->first;
  const Allocation& a = it->second;
  if (p - base > a.bytes || bytes > a.bytes - (p - base)) return false;
  int fd = fcntl(a.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return false;
  out->base = reinterpret_cast<void*>(base);
  out->bytes = a.bytes;
  out->fd = fd;
  return true;
}

}  // namespace tessera
