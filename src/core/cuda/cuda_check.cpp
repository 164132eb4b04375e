#include "core/cuda/cuda_check.hpp"

#include "core/cuda_driver.hpp"

namespace tessera {
namespace {
using GetErrorStringFn = CUresult (*)(CUresult, const char**);
}  // namespace

std::string cudaErrorText(cudaError_t e) {
  std::string s = strprintf("%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
  cudaGetLastError();
  return s;
}

std::string cuErrorText(CUresult r) {
  // Looked up once, as introduced in CUDA 6.0; nullptr without a driver.
  static const auto getErrorString = [] {
    std::string ignored;
    return reinterpret_cast<GetErrorStringFn>(
        cudaDriverEntryPoint("cuGetErrorString", 6000, &ignored));
  }();
  const char* text = nullptr;
  if (getErrorString == nullptr || getErrorString(r, &text) != CUDA_SUCCESS || !text)
    return strprintf("CUresult %d", static_cast<int>(r));
  return strprintf("CUresult %d (%s)", static_cast<int>(r), text);
}

Result cudaCheck(Subsys subsys, cudaError_t e, int rank, const char* what) {
  if (e == cudaSuccess) return tsrSuccess;
  return failWith(subsys, tsrUnhandledCudaError, "rank %d: %s failed: %s", rank, what,
                  cudaErrorText(e).c_str());
}

}  // namespace tessera
