// Makes a CUDA device current on the calling thread for a scope. Thread ranks of one process share
// the runtime but not the current device, so every entry point that touches a rank's GPU takes
// one. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

namespace tessera {

// Makes `device` current for the guard's life, then restores the old one. The device's primary
// context is initialized and current afterwards (cudaSetDevice does that since CUDA 12), so
// driver calls may follow. A negative `device` leaves the current one as it is.
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

}  // namespace tessera
