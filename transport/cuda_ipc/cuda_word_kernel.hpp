// The transport layer's only kernel: a one-thread, system-scope release add on a 64-bit word that
// lives in device memory (a semaphore counter, possibly mapped from a peer GPU or process). It
// runs in stream order, so it starts only after every copy queued before it on the stream has
// completed; its release then publishes those copies to a reader that acquires the counter.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera {

// Queues the add on `stream`; returns the launch error (the add itself completes with the stream).
cudaError_t launchAddWord(uint64_t* word, uint64_t value, cudaStream_t stream);

}  // namespace tessera
