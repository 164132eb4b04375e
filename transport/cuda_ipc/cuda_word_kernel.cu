#include "tessera/device/atomics.hpp"
#include "transport/cuda_ipc/cuda_word_kernel.hpp"

namespace tessera {
namespace {

__global__ void addWordKernel(uint64_t* word, uint64_t value) {
  // atom.add.release.sys: the same operation a kernel's SemaphoreDeviceHandle::signal() uses.
  device::fetchAddRelease(word, value);
}

}  // namespace

cudaError_t launchAddWord(uint64_t* word, uint64_t value, cudaStream_t stream) {
  addWordKernel<<<1, 1, 0, stream>>>(word, value);
  return cudaGetLastError();
}

}  // namespace tessera
