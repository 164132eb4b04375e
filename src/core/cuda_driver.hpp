// The CUDA runtime (linked statically) and the CUDA driver, reached only through driver entry
// points (cudaGetDriverEntryPointByVersion): libcuda is never linked, so a binary built with CUDA
// starts on a machine without a driver or GPU, and every question here then has an answer
// ("no device, because ...") instead of a load failure.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.hpp"

namespace tessera {

struct CudaDeviceInfo {
  int index = -1;
  std::string name;
  std::string busId;  // "0000:3b:00.0", lower case
  int ccMajor = 0;
  int ccMinor = 0;
  size_t totalMemory = 0;
  int multiProcessors = 0;
};

// True when this build has CUDA compiled in.
bool cudaBuilt();

// Number of usable CUDA devices. Never fails: with no CUDA in the build, no driver or no device,
// returns 0 and says why in `whyNone`.
int cudaDeviceCount(std::string* whyNone);

// Properties of device `dev` (tsrInvalidArgument if it does not exist).
Result cudaGetDeviceInfo(int dev, CudaDeviceInfo* info);

// The calling thread's current device, or -1 when there is none.
int cudaCurrentDevice();

// CUDA runtime version (e.g. 13000), 0 without CUDA.
int cudaRuntimeVersion();

// The driver's CUDA version through the cuDriverGetVersion entry point; 0 and a reason when
// there is no driver.
int cudaDriverVersion(std::string* whyNone);

// Address of a driver API function (`name` without version suffix, e.g. "cuStreamWriteValue32")
// as introduced in CUDA version `cudaVersion` (1000*major + 10*minor), or nullptr with a reason.
void* cudaDriverEntryPoint(const char* name, unsigned cudaVersion, std::string* why);

}  // namespace tessera
