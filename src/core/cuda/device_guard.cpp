#include "core/cuda/device_guard.hpp"

namespace tessera {

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

}  // namespace tessera
