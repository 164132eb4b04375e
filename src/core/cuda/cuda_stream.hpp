// Streams and events as the host code holds them: void* in headers that must stay free of CUDA
// headers, cast back here; and a stream wait with a deadline (cudaStreamSynchronize would wait
// forever for a kernel that waits for a dead peer). CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include "core/deadline.hpp"
#include "core/status.hpp"

namespace tessera {

inline cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }
inline cudaEvent_t asEvent(void* e) { return static_cast<cudaEvent_t>(e); }

// Polls `stream` until its work is done or the deadline passes (tsrTimeout naming `what`).
Result waitStream(cudaStream_t stream, const Deadline& deadline, const char* what);

}  // namespace tessera
