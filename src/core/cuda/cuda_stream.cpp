#include "core/cuda/cuda_stream.hpp"

#include "core/cuda/cuda_check.hpp"
#include "core/log.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kCuda;
}  // namespace

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
