#include "core/cuda_driver.hpp"

#include <cstdio>

#include "core/build_config.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kCuda;
}  // namespace

#if TESSERA_HAVE_CUDA

namespace {
std::string cudaWhy(cudaError_t e) {
  std::string s = strprintf("%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  cudaGetLastError();  // clear the sticky-free error so later calls start clean
  return s;
}
}  // namespace

bool cudaBuilt() { return true; }

int cudaDeviceCount(std::string* whyNone) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (whyNone != nullptr) {
      // The runtime calls a missing driver "insufficient"; say which it is.
      int driver = 0;
      if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
          driver == 0)
        *whyNone = "no CUDA driver is installed (libcuda.so.1 not found): " + cudaWhy(e);
      else
        *whyNone = "cudaGetDeviceCount failed: " + cudaWhy(e);
    }
    return 0;
  }
  if (n == 0 && whyNone != nullptr) *whyNone = "the CUDA driver reports no devices";
  return n;
}

Result cudaGetDeviceInfo(int dev, CudaDeviceInfo* info) {
  if (info == nullptr) return TSR_FAIL(tsrInvalidArgument, "cudaGetDeviceInfo: info is NULL");
  std::string why;
  int n = cudaDeviceCount(&why);
  if (dev < 0 || dev >= n)
    return TSR_FAIL(tsrInvalidArgument, "CUDA device %d does not exist (%d devices%s%s)", dev, n,
                    why.empty() ? "" : ": ", why.c_str());
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, dev);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaGetDeviceProperties(%d): %s", dev,
                    cudaWhy(e).c_str());
  info->index = dev;
  info->name = prop.name;
  info->busId =
      strprintf("%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
                static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
  info->ccMajor = prop.major;
  info->ccMinor = prop.minor;
  info->totalMemory = prop.totalGlobalMem;
  info->multiProcessors = prop.multiProcessorCount;
  return tsrSuccess;
}

int cudaCurrentDevice() {
  std::string why;
  if (cudaDeviceCount(&why) == 0) return -1;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

int cudaRuntimeVersion() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v;
}

void* cudaDriverEntryPoint(const char* name, unsigned cudaVersion, std::string* why) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  cudaError_t e =
      cudaGetDriverEntryPointByVersion(name, &fn, cudaVersion, cudaEnableDefault, &status);
#else
  (void)cudaVersion;
  cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &status);
#endif
  if (e != cudaSuccess) {
    if (why != nullptr) *why = strprintf("driver entry point %s: %s", name, cudaWhy(e).c_str());
    return nullptr;
  }
  if (fn == nullptr || status != cudaDriverEntryPointSuccess) {
    if (why != nullptr)
      *why = strprintf("driver entry point %s (CUDA %u): %s", name, cudaVersion,
                       status == cudaDriverEntryPointVersionNotSufficent
                           ? "the driver is older than this function"
                           : "not provided by the driver");
    return nullptr;
  }
  return fn;
}

int cudaDriverVersion(std::string* whyNone) {
  using DriverGetVersion = int (*)(int*);  // CUresult cuDriverGetVersion(int*), CUDA 2.2
  auto fn =
      reinterpret_cast<DriverGetVersion>(cudaDriverEntryPoint("cuDriverGetVersion", 2020, whyNone));
  if (fn == nullptr) {
    int runtimeSays = 0;
    if (whyNone != nullptr && cudaDriverGetVersion(&runtimeSays) == cudaSuccess && runtimeSays == 0)
      *whyNone = "no CUDA driver is installed (libcuda.so.1 not found)";
    return 0;
  }
  int v = 0;
  if (fn(&v) != 0) {
    if (whyNone != nullptr) *whyNone = "cuDriverGetVersion failed";
    return 0;
  }
  return v;
}

#else  // !TESSERA_HAVE_CUDA

namespace {
constexpr const char* kNoCuda =
    "this build of tessera has no CUDA (configured without a CUDA compiler)";
}

bool cudaBuilt() { return false; }
int cudaDeviceCount(std::string* whyNone) {
  if (whyNone != nullptr) *whyNone = kNoCuda;
  return 0;
}
Result cudaGetDeviceInfo(int dev, CudaDeviceInfo*) {
  return TSR_FAIL(tsrInvalidArgument, "CUDA device %d does not exist: %s", dev, kNoCuda);
}
int cudaCurrentDevice() { return -1; }
int cudaRuntimeVersion() { return 0; }
void* cudaDriverEntryPoint(const char*, unsigned, std::string* why) {
  if (why != nullptr) *why = kNoCuda;
  return nullptr;
}
int cudaDriverVersion(std::string* whyNone) {
  if (whyNone != nullptr) *whyNone = kNoCuda;
  return 0;
}

#endif

}  // namespace tessera
