// CUDA failures as tessera results and sentences, for every layer's CUDA host code: a runtime code
// becomes tsrUnhandledCudaError with a sentence that names the rank and what was being done; a
// driver code (CUresult) gets the driver's own words. CUDA builds only (the no-CUDA build compiles
// no file that includes this).
#pragma once

#include <cuda.h>  // types only: the driver is reached through entry points (core/cuda_driver.hpp)
#include <cuda_runtime_api.h>

#include <string>

#include "core/log.hpp"
#include "core/status.hpp"

namespace tessera {

// "cudaErrorInvalidValue: invalid argument"; clears the runtime's last (non-sticky) error, so a
// later launch check does not report this failure again.
std::string cudaErrorText(cudaError_t e);
// "CUresult 1 (invalid argument)" through the driver's cuGetErrorString, when there is a driver.
std::string cuErrorText(CUresult r);

// tsrSuccess, or tsrUnhandledCudaError with "rank R: <what> failed: <cudaErrorText>", logged
// under `subsys`.
Result cudaCheck(Subsys subsys, cudaError_t e, int rank, const char* what);

}  // namespace tessera

// In a file that declares kLogSubsys (as for TSR_FAIL): the result of the runtime's `e`.
#define TSR_CUDA_CHECK(e, rank, what) ::tessera::cudaCheck(kLogSubsys, (e), (rank), (what))
// Returns the failure from the calling function, naming the call itself.
#define TSR_CUDA(call, rank) TSR_CHECK(TSR_CUDA_CHECK((call), (rank), #call))
