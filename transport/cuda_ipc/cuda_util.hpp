// Small pieces every CUDA file of the transport layer needs: the driver functions it calls
// (looked up once through cudaDriverEntryPoint; libcuda is never linked), error sentences for
// runtime and driver codes, a guard that makes a device current for one call, and a stream wait
// that honours a deadline (cudaStreamSynchronize would wait forever).
#pragma once

#include <cuda.h>  // types and constants only: every driver function comes from CuDriver
#include <cuda_runtime_api.h>

#include <string>

#include "core/deadline.hpp"
#include "core/status.hpp"

namespace tessera {

// Driver functions, each nullptr when the driver lacks it (`why` then says which and why).
struct CuDriver {
  CUresult (*getErrorString)(CUresult, const char**) = nullptr;
  CUresult (*deviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*memGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*memGetAllocationGranularity)(size_t*, const CUmemAllocationProp*,
                                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*memCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                        unsigned long long) = nullptr;
  CUresult (*memRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*memAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                unsigned long long) = nullptr;
  CUresult (*memAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                     unsigned long long) = nullptr;
  CUresult (*memUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*memExportToShareableHandle)(void*, CUmemGenericAllocationHandle,
                                         CUmemAllocationHandleType, unsigned long long) = nullptr;
  CUresult (*memImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*,
                                           CUmemAllocationHandleType) = nullptr;
  bool vmm = false;  // every cuMem* function above was found
  std::string why;   // what is missing, when !vmm
};

// The process's table (looked up on first use; the runtime must be able to start).
const CuDriver& cuDriver();

// "cudaErrorInvalidValue: invalid argument"; clears the runtime's last (non-sticky) error.
std::string cudaErrorText(cudaError_t e);
// "CUDA_ERROR_INVALID_VALUE (invalid argument)" through the driver's own strings.
std::string cuErrorText(CUresult r);

// Makes `device` current on the calling thread for the guard's life, then restores the old one.
// Thread ranks of one process share the runtime but not the current device. The device's primary
// context is initialized and current afterwards (cudaSetDevice does that since CUDA 12), so
// driver calls may follow.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;
  // cudaSuccess, or why the device could not be made current.
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

// Polls `stream` until its work is done or the deadline passes (tsrTimeout naming `what`).
Result waitStream(cudaStream_t stream, const Deadline& deadline, const char* what);

}  // namespace tessera
