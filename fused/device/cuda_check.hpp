// Small helpers the fused GPU executor's host files share: the executor keeps streams and events
// as void* (device_engine.hpp stays free of CUDA headers), and every runtime call's failure
// becomes a sentence naming the rank and what was being done.
#pragma once

#include <cuda_runtime_api.h>

#include "core/log.hpp"
#include "core/status.hpp"
#include "transport/cuda_ipc/cuda_util.hpp"

namespace tessera::fused {

inline cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }
inline cudaEvent_t asEvent(void* e) { return static_cast<cudaEvent_t>(e); }

inline Result cudaCheck(cudaError_t e, int rank, const char* what) {
  if (e == cudaSuccess) return tsrSuccess;
  return ::tessera::failWith(Subsys::kFused, tsrUnhandledCudaError, "rank %d: %s failed: %s", rank,
                             what, cudaErrorText(e).c_str());
}

}  // namespace tessera::fused
