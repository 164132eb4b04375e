// The CUDA driver functions the CUDA transports call (VMM allocation, export and import, address
// ranges, attributes), looked up once through cudaDriverEntryPoint (libcuda is never linked). The
// CUDA helpers every layer shares (error sentences, device guard, stream waits) are in core/cuda/.
#pragma once

#include <cuda.h>  // types and constants only: every driver function comes from CuDriver

#include <string>

#include "core/status.hpp"

namespace tessera {

// Driver functions, each nullptr when the driver lacks it (`why` then says which and why).
struct CuDriver {
  CUresult (*deviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*memGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*memGetAllocationGranularity)(size_t*, const CUmemAllocationProp*,
                                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*memCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                        unsigned long long) = nullptr;
  CUresult (*memRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*memAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                unsigned long long) = nullptr;
  CUresult (*memAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                     unsigned long long) = nullptr;
  CUresult (*memUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*memExportToShareableHandle)(void*, CUmemGenericAllocationHandle,
                                         CUmemAllocationHandleType, unsigned long long) = nullptr;
  CUresult (*memImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*,
                                           CUmemAllocationHandleType) = nullptr;
  bool vmm = false;  // every cuMem* function above was found
  std::string why;   // what is missing, when !vmm
};

// The process's table (looked up on first use; the runtime must be able to start).
const CuDriver& cuDriver();

}  // namespace tessera
