#include "transport/cuda_ipc/cuda_util.hpp"

#include <mutex>

#include "core/cuda_driver.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kCuda;

// Looks `name` up as it was in CUDA `version` (the version that introduced the signature the
// table declares) and stores it; records the first miss in `why`.
template <typename Fn>
void lookUp(Fn* slot, const char* name, unsigned version, std::string* why) {
  std::string miss;
  *slot = reinterpret_cast<Fn>(cudaDriverEntryPoint(name, version, &miss));
  if (*slot == nullptr && why->empty()) *why = miss;
}

CuDriver loadDriver() {
  CuDriver d;
  std::string ignored;
  lookUp(&d.getErrorString, "cuGetErrorString", 6000, &ignored);
  lookUp(&d.deviceGetAttribute, "cuDeviceGetAttribute", 2000, &d.why);
  lookUp(&d.memGetAddressRange, "cuMemGetAddressRange", 3020, &d.why);
  lookUp(&d.memGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020, &d.why);
  lookUp(&d.memCreate, "cuMemCreate", 10020, &d.why);
  lookUp(&d.memRelease, "cuMemRelease", 10020, &d.why);
  lookUp(&d.memAddressReserve, "cuMemAddressReserve", 10020, &d.why);
  lookUp(&d.memAddressFree, "cuMemAddressFree", 10020, &d.why);
  lookUp(&d.memMap, "cuMemMap", 10020, &d.why);
  lookUp(&d.memUnmap, "cuMemUnmap", 10020, &d.why);
  lookUp(&d.memSetAccess, "cuMemSetAccess", 10020, &d.why);
  lookUp(&d.memExportToShareableHandle, "cuMemExportToShareableHandle", 10020, &d.why);
  lookUp(&d.memImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020, &d.why);
  d.vmm = d.why.empty();
  if (!d.vmm) TSR_INFO("CUDA VMM is unavailable: %s", d.why.c_str());
  return d;
}
}  // namespace

const CuDriver& cuDriver() {
  static const CuDriver table = loadDriver();
  return table;
}

std::string cudaErrorText(cudaError_t e) {
  std::string s = strprintf("%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
  cudaGetLastError();
  return s;
}

std::string cuErrorText(CUresult r) {
  const char* text = nullptr;
  const CuDriver& d = cuDriver();
  if (d.getErrorString == nullptr || d.getErrorString(r, &text) != CUDA_SUCCESS || !text)
    return strprintf("CUresult %d", static_cast<int>(r));
  return strprintf("CUresult %d (%s)", static_cast<int>(r), text);
}

CudaDeviceGuard::CudaDeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    cudaGetLastError();
    previous_ = -1;
  }
  // Even when `device` is already current: since CUDA 12, cudaSetDevice also initializes the
  // primary context and makes it current, which the driver calls (cuMem*) need.
  if (device >= 0) status_ = cudaSetDevice(device);
  if (status_ != cudaSuccess) cudaGetLastError();
}

CudaDeviceGuard::~CudaDeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_)
    cudaSetDevice(previous_);
  cudaGetLastError();
}

Result waitStream(cudaStream_t stream, const Deadline& deadline, const char* what) {
  Backoff backoff;
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return tsrSuccess;
    if (e != cudaErrorNotReady)
      return TSR_FAIL(tsrUnhandledCudaError, "%s failed on the GPU: %s", what,
                      cudaErrorText(e).c_str());
    if (deadline.expired())
      return TSR_FAIL(tsrTimeout,
                      "%s did not complete within %.3g s (the GPU stream is still busy)", what,
                      deadline.seconds());
    backoff.pause();
  }
}

}  // namespace tessera
