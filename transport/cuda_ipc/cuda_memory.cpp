// CUDA memory for the transport layer (see cuda_memory.hpp). Shareable device memory is a cuMem
// VMM allocation exported as a POSIX file descriptor where the device supports it (an importer
// then maps the same physical pages; no legacy IPC limits), else cudaMalloc, whose legacy IPC
// handle cuda_ipc exports instead. Both are zeroed: semaphore counters start at 0.
#include "transport/cuda_ipc/cuda_memory.hpp"

#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_stream.hpp"
#include "core/cuda/device_guard.hpp"
#include "core/idle_release.hpp"
#include "transport/cuda_ipc/cu_driver.hpp"
#include "transport/cuda_ipc/cuda_word_kernel.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kAlloc;
constexpr double kWordSeconds = 30;

std::atomic<bool> preferLegacy{false};

struct VmmInfo {
  size_t bytes;
  size_t granularity;
};
std::mutex vmmMutex;
std::map<uintptr_t, VmmInfo> vmmAllocations;

// One non-blocking stream per device for the word accesses and zeroing: never ordered behind
// kernels on other streams (a kernel may be waiting for exactly this access).
Result utilityStream(int device, cudaStream_t* out) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 0) return TSR_FAIL(tsrInvalidArgument, "no CUDA device for a utility stream");
  if (streams.size() <= static_cast<size_t>(device))
    streams.resize(static_cast<size_t>(device) + 1, nullptr);
  cudaStream_t& s = streams[static_cast<size_t>(device)];
  if (s == nullptr) {
    CudaDeviceGuard guard(device);
    if (guard.status() != cudaSuccess)
      return TSR_FAIL(tsrUnhandledCudaError, "cudaSetDevice(%d): %s", device,
                      cudaErrorText(guard.status()).c_str());
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      s = nullptr;
      return TSR_FAIL(tsrUnhandledCudaError, "cudaStreamCreateWithFlags on device %d: %s", device,
                      cudaErrorText(e).c_str());
    }
  }
  *out = s;
  return tsrSuccess;
}

Result zero(void* ptr, size_t bytes, int device) {
  cudaStream_t s;
  TSR_CHECK(utilityStream(device, &s));
  cudaError_t e = cudaMemsetAsync(ptr, 0, bytes, s);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaMemsetAsync of %zu bytes on device %d: %s", bytes,
                    device, cudaErrorText(e).c_str());
  return waitStream(s, Deadline::after(kWordSeconds), "zeroing new device memory");
}

int deviceAttribute(CUdevice_attribute a, int device) {
  int v = 0;
  const CuDriver& d = cuDriver();
  if (d.deviceGetAttribute == nullptr || d.deviceGetAttribute(&v, a, device) != CUDA_SUCCESS)
    return 0;
  return v;
}

// Whether `device` can allocate VMM memory with a POSIX-FD handle; else why not.
bool vmmUsable(int device, std::string* why) {
  const CuDriver& d = cuDriver();
  if (!d.vmm) {
    *why = d.why;
    return false;
  }
  if (!deviceAttribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device)) {
    *why = strprintf("device %d does not support virtual memory management", device);
    return false;
  }
  if (!deviceAttribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device)) {
    *why = strprintf("device %d cannot export POSIX file descriptors", device);
    return false;
  }
  static std::once_flag logged;
  std::call_once(logged, [device] {
    // Fabric handles (multi-node NVLink) are only detected: cuda_ipc exports POSIX FDs.
    TSR_INFO("device %d: VMM with POSIX-FD handles; fabric handles %s", device,
             deviceAttribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, device)
                 ? "supported (not used)"
                 : "not supported");
  });
  return true;
}

Result allocateVmm(size_t bytes, int device, CudaAllocation* out) {
  const CuDriver& d = cuDriver();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CUresult r = d.memGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS || gran == 0)
    return TSR_FAIL(tsrUnhandledCudaError, "cuMemGetAllocationGranularity on device %d: %s", device,
                    cuErrorText(r).c_str());
  size_t size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle handle = 0;
  r = d.memCreate(&handle, size, &prop, 0);
  if (r != CUDA_SUCCESS)
    return TSR_FAIL(tsrUnhandledCudaError, "cuMemCreate of %zu bytes on device %d: %s", size,
                    device, cuErrorText(r).c_str());
  CUdeviceptr ptr = 0;
  bool reserved = false, mapped = false;
  int fd = -1;
  auto undo = [&] {
    if (fd >= 0) close(fd);
    // Unmapping and releasing may wait for an idle device (core/idle_release.hpp).
    releaseWhenIdle(device, [&d, ptr, size, handle, mapped, reserved] {
      if (mapped) d.memUnmap(ptr, size);
      if (reserved) d.memAddressFree(ptr, size);
      d.memRelease(handle);
    });
  };
  const char* step = "cuMemAddressReserve";
  r = d.memAddressReserve(&ptr, size, gran, 0, 0);
  if (r == CUDA_SUCCESS) {
    reserved = true;
    step = "cuMemMap";
    r = d.memMap(ptr, size, 0, handle, 0);
  }
  if (r == CUDA_SUCCESS) {
    mapped = true;
    // The owner's device and every device that can reach it as a peer (p2p ranks of this
    // process map nothing themselves: they use this address).
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    std::vector<CUmemAccessDesc> access;
    for (int dev = 0; dev < n; ++dev) {
      int can = dev == device;
      if (!can && cudaDeviceCanAccessPeer(&can, dev, device) != cudaSuccess) can = 0;
      if (!can) continue;
      CUmemAccessDesc a{};
      a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      a.location.id = dev;
      a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      access.push_back(a);
    }
    cudaGetLastError();
    step = "cuMemSetAccess";
    r = d.memSetAccess(ptr, size, access.data(), access.size());
  }
  if (r == CUDA_SUCCESS) {
    step = "cuMemExportToShareableHandle";
    r = d.memExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  }
  if (r != CUDA_SUCCESS) {
    undo();
    return TSR_FAIL(tsrUnhandledCudaError, "%s for %zu bytes on device %d: %s", step, size, device,
                    cuErrorText(r).c_str());
  }
  void* p = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  Result z = zero(p, size, device);
  if (z != tsrSuccess) {
    undo();
    return z;
  }
  {
    std::lock_guard<std::mutex> lock(vmmMutex);
    vmmAllocations[ptr] = VmmInfo{size, gran};
  }
  out->ptr = p;
  out->bytes = size;
  out->device = device;
  out->vmm = true;
  out->shareableFd = fd;
  out->release = [ptr, size, handle, fd, device] {
    {
      std::lock_guard<std::mutex> lock(vmmMutex);
      vmmAllocations.erase(ptr);
    }
    close(fd);
    // Unmapping may wait for an idle device: held back while a resident grid runs there.
    releaseWhenIdle(device, [ptr, size, handle, device] {
      const CuDriver& drv = cuDriver();
      CudaDeviceGuard guard(device);
      CUresult u = drv.memUnmap(ptr, size);
      if (u == CUDA_SUCCESS) u = drv.memAddressFree(ptr, size);
      CUresult rel = drv.memRelease(handle);
      if (u != CUDA_SUCCESS || rel != CUDA_SUCCESS)
        TSR_WARN("freeing a %zu-byte VMM allocation on device %d: %s / %s", size, device,
                 cuErrorText(u).c_str(), cuErrorText(rel).c_str());
    });
  };
  return tsrSuccess;
}

Result allocateLegacy(size_t bytes, int device, CudaAllocation* out) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaMalloc of %zu bytes on device %d: %s", bytes,
                    device, cudaErrorText(e).c_str());
  Result z = zero(p, bytes, device);
  if (z != tsrSuccess) {
    releaseWhenIdle(device, [p] { (void)cudaFree(p); });
    return z;
  }
  out->ptr = p;
  out->bytes = bytes;
  out->device = device;
  out->vmm = false;
  out->shareableFd = -1;
  out->release = [p, device] {
    releaseWhenIdle(device, [p, device] {
      CudaDeviceGuard guard(device);
      cudaError_t f = cudaFree(p);
      if (f != cudaSuccess) TSR_WARN("cudaFree on device %d: %s", device, cudaErrorText(f).c_str());
    });
  };
  return tsrSuccess;
}

// The device of a word for the word accesses.
Result wordDevice(const void* p, int* device, const char* op) {
  std::string why;
  TSR_CHECK(cudaPointerDevice(p, device, &why));
  if (*device < 0) return TSR_FAIL(tsrInvalidArgument, "%s at %p: %s", op, p, why.c_str());
  return tsrSuccess;
}

}  // namespace

Result cudaAllocateShareable(size_t bytes, int device, CudaAllocation* out) {
  if (bytes == 0 || out == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "cudaAllocateShareable(%zu bytes, device %d)", bytes,
                    device);
  CudaDeviceGuard guard(device);
  if (guard.status() != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaSetDevice(%d) to allocate %zu bytes: %s", device,
                    bytes, cudaErrorText(guard.status()).c_str());
  std::string whyNot = "tests asked for cudaMalloc";
  if (!preferLegacy.load(std::memory_order_relaxed) && vmmUsable(device, &whyNot)) {
    Result r = allocateVmm(bytes, device, out);
    if (r == tsrSuccess) return tsrSuccess;
    whyNot = lastErrorMessage();
  }
  TSR_TRACE("device %d: cudaMalloc for %zu shareable bytes (%s)", device, bytes, whyNot.c_str());
  return allocateLegacy(bytes, device, out);
}

Result cudaAllocateForUser(size_t bytes, int device, CudaAllocation* out) {
  if (bytes == 0 || out == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "cudaAllocateForUser(%zu bytes, device %d)", bytes, device);
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    cudaGetLastError();  // the runtime's sticky "no device"
    return TSR_FAIL(tsrInvalidUsage, "no CUDA device is visible to allocate %zu bytes on (%s)",
                    bytes, e != cudaSuccess ? cudaErrorText(e).c_str() : "0 devices");
  }
  if (device < 0 && (e = cudaGetDevice(&device)) != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaGetDevice: %s", cudaErrorText(e).c_str());
  if (device >= n)
    return TSR_FAIL(tsrInvalidUsage, "device %d is not one of the %d visible CUDA devices", device,
                    n);
  CudaDeviceGuard guard(device);
  if (guard.status() != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaSetDevice(%d) to allocate %zu bytes: %s", device,
                    bytes, cudaErrorText(guard.status()).c_str());
  return allocateLegacy(bytes, device, out);
}

Result cudaPinHostMemory(void* ptr, size_t bytes, std::function<void()>* unpin, int device) {
  // The registration is portable (every device maps it), but the current device's context is the
  // one it is made in and the one asked for the device address below.
  CudaDeviceGuard guard(device);
  if (guard.status() != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaSetDevice(%d) to pin %zu host bytes: %s", device,
                    bytes, cudaErrorText(guard.status()).c_str());
  int current = device;
  if (current < 0 && cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    current = 0;
  }
  // The device handles (FIFO, semaphores) hand the host address of pinned memory to kernels.
  int sameAddress = 0;
  cudaError_t e =
      cudaDeviceGetAttribute(&sameAddress, cudaDevAttrCanUseHostPointerForRegisteredMem, current);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "cudaDeviceGetAttribute(CanUseHostPointerForRegisteredMem) on device %d: %s",
                    current, cudaErrorText(e).c_str());
  if (!sameAddress)
    return TSR_FAIL(tsrInvalidUsage,
                    "device %d cannot use the host address of registered host memory "
                    "(cudaDevAttrCanUseHostPointerForRegisteredMem is 0); tessera's GPU FIFOs and "
                    "semaphores need that, so this platform is unsupported",
                    current);
  e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaHostRegister(%p, %zu bytes) on device %d: %s", ptr,
                    bytes, current, cudaErrorText(e).c_str());
  void* devicePtr = nullptr;
  e = cudaHostGetDevicePointer(&devicePtr, ptr, 0);
  if (e != cudaSuccess || devicePtr != ptr) {
    std::string why = e != cudaSuccess ? cudaErrorText(e) : strprintf("it is %p", devicePtr);
    releaseWhenIdle(current, [ptr] { (void)cudaHostUnregister(ptr); });
    cudaGetLastError();
    return TSR_FAIL(tsrInvalidUsage,
                    "the device address of pinned host memory %p on device %d is not the host "
                    "address (%s); tessera's GPU FIFOs and semaphores need that, so this platform "
                    "is unsupported",
                    ptr, current, why.c_str());
  }
  // Unregistering waits for an idle device: held back while a resident grid runs on `current`
  // (the pages stay pinned until then; the caller may free its memory meanwhile).
  *unpin = [ptr, current] {
    releaseWhenIdle(current, [ptr] {
      cudaError_t u = cudaHostUnregister(ptr);
      if (u != cudaSuccess) TSR_WARN("cudaHostUnregister(%p): %s", ptr, cudaErrorText(u).c_str());
    });
  };
  return tsrSuccess;
}

Result cudaPointerDevice(const void* ptr, int* device, std::string* why) {
  // No device guard: the pointer's device is what this asks, and unified addressing answers for
  // any device from any current one.
  *device = -1;
  cudaPointerAttributes attr{};
  cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
  if (e != cudaSuccess) {
    *why = "cudaPointerGetAttributes: " + cudaErrorText(e);
    return TSR_FAIL(tsrUnhandledCudaError, "cudaPointerGetAttributes(%p): %s", ptr,
                    cudaErrorText(e).c_str());
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice: *device = attr.device; return tsrSuccess;
    case cudaMemoryTypeManaged: *why = "it is managed memory, which peers cannot map"; break;
    case cudaMemoryTypeHost: *why = "it is pinned host memory"; break;
    default: *why = "CUDA does not know it (pageable host memory)"; break;
  }
  return tsrSuccess;
}

namespace {
// One operation on a device word: issued by `issue` on the word's device's utility stream, then
// waited for (each of these is a host thread reading or signalling a GPU semaphore).
Result wordOp(const void* devicePtr, const char* what,
              const std::function<cudaError_t(cudaStream_t)>& issue) {
  int dev = -1;
  TSR_CHECK(wordDevice(devicePtr, &dev, what));
  cudaStream_t s;
  TSR_CHECK(utilityStream(dev, &s));
  CudaDeviceGuard guard(dev);
  cudaError_t e = issue(s);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "%s at %p: %s", what, devicePtr,
                    cudaErrorText(e).c_str());
  return waitStream(s, Deadline::after(kWordSeconds), what);
}
}  // namespace

Result cudaReadWord(const uint64_t* devicePtr, uint64_t* value) {
  return wordOp(devicePtr, "reading a device word", [&](cudaStream_t s) {
    return cudaMemcpyAsync(value, devicePtr, sizeof *value, cudaMemcpyDeviceToHost, s);
  });
}

Result cudaWriteWord(uint64_t* devicePtr, uint64_t value) {
  // `value` lives on this stack until wordOp has waited for the copy.
  return wordOp(devicePtr, "writing a device word", [&](cudaStream_t s) {
    return cudaMemcpyAsync(devicePtr, &value, sizeof value, cudaMemcpyHostToDevice, s);
  });
}

Result cudaAddWord(uint64_t* devicePtr, uint64_t value) {
  return wordOp(devicePtr, "adding to a device word",
                [&](cudaStream_t s) { return launchAddWord(devicePtr, value, s); });
}

bool cudaVmmAllocationInfo(const void* ptr, size_t* bytes, size_t* granularity) {
  std::lock_guard<std::mutex> lock(vmmMutex);
  auto it = vmmAllocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == vmmAllocations.end()) return false;
  *bytes = it->second.bytes;
  *granularity = it->second.granularity;
  return true;
}

void cudaPreferLegacyAllocation(bool legacy) {
  preferLegacy.store(legacy, std::memory_order_relaxed);
}

}  // namespace tessera
