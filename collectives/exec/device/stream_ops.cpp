// Stream memory operations through driver entry points (stream_ops.hpp).
//
// What the CUDA documentation says, and what this file relies on:
// - Since CUDA 11.7 there are two versions of these functions. The V1 ones (entry point version
//   8000) were off by default on Linux (nvidia module parameter NVreg_EnableStreamMemOPs=1) and
//   were queried with CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS, now ..._V1 and deprecated. The
//   V2 ones (cuStreamWaitValue32_v2 / cuStreamWriteValue32_v2, entry point version 11070) "are
//   available by default on all platforms" (driver API 11.8, "Stream Memory Operations"); CUDA 12
//   removed the V1 API and the attribute. So availability here is: the V2 entry points exist (a
//   driver of CUDA 11.7 or newer) and there is a current device. No device attribute is consulted:
//   the remaining ones (..._WAIT_VALUE_NOR, ..._64_BIT_..., ..._FLUSH_REMOTE_WRITES) cover flags
//   and widths this file does not use.
// - CU_STREAM_WAIT_VALUE_GEQ waits until (int32_t)(*addr - value) >= 0, "a cyclic comparison which
//   ignores wraparound" (cuda.h); CU_STREAM_WAIT_VALUE_EQ until *addr == value.
// - cuStreamWriteValue32 with CU_STREAM_WRITE_VALUE_DEFAULT fences before the write, so the
//   stream's earlier work is visible to whoever sees the value.
// - Addresses are device addresses (mapped pinned host memory through its device pointer; not
//   managed memory).
#include "collectives/exec/device/stream_ops.hpp"

#include "core/build_config.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda.h>  // types and constants only: the functions come from the driver's entry points
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda_driver.hpp"
#endif

namespace tessera::exec {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}  // namespace

#if TESSERA_HAVE_CUDA

namespace {

// The V2 signature (cudaTypedefs.h: PFN_cuStreamWaitValue32_v11070, ..._WriteValue32_v11070).
using StreamValue32Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
constexpr unsigned kMemOpsVersion = 11070;

struct MemOps {
  StreamValue32Fn wait32 = nullptr;
  StreamValue32Fn write32 = nullptr;
  std::string why;  // why not, when either is missing
};

const MemOps& memOps() {
  static const MemOps table = [] {
    MemOps t;
    std::string why;
    t.wait32 = reinterpret_cast<StreamValue32Fn>(
        cudaDriverEntryPoint("cuStreamWaitValue32", kMemOpsVersion, &why));
    if (t.wait32 != nullptr)
      t.write32 = reinterpret_cast<StreamValue32Fn>(
          cudaDriverEntryPoint("cuStreamWriteValue32", kMemOpsVersion, &why));
    if (t.wait32 == nullptr || t.write32 == nullptr)
      t.why = "stream memory operations are unavailable: " + why;
    return t;
  }();
  return table;
}

}  // namespace

bool streamMemOpsAvailable(std::string* why) {
  const MemOps& ops = memOps();
  if (ops.wait32 == nullptr || ops.write32 == nullptr) {
    if (why != nullptr) *why = ops.why;
    return false;
  }
  int device = -1;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) {
    if (why != nullptr) *why = "stream memory operations need a CUDA device: " + cudaErrorText(e);
    return false;
  }
  return true;
}

Result streamWaitValue32(void* stream, uint32_t* addr, uint32_t value, bool geq) {
  const MemOps& ops = memOps();
  if (ops.wait32 == nullptr) return TSR_FAIL(tsrInvalidUsage, "%s", ops.why.c_str());
  const unsigned flags = geq ? CU_STREAM_WAIT_VALUE_GEQ : CU_STREAM_WAIT_VALUE_EQ;
  CUresult r =
      ops.wait32(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(addr), value, flags);
  if (r != CUDA_SUCCESS)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "cuStreamWaitValue32 (stream %p, address %p, %s %u) failed: %s", stream,
                    static_cast<void*>(addr), geq ? ">=" : "==", value, cuErrorText(r).c_str());
  return tsrSuccess;
}

Result streamWriteValue32(void* stream, uint32_t* addr, uint32_t value) {
  const MemOps& ops = memOps();
  if (ops.write32 == nullptr) return TSR_FAIL(tsrInvalidUsage, "%s", ops.why.c_str());
  CUresult r = ops.write32(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(addr),
                           value, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS)
    return TSR_FAIL(tsrUnhandledCudaError,
                    "cuStreamWriteValue32 (stream %p, address %p, value %u) failed: %s", stream,
                    static_cast<void*>(addr), value, cuErrorText(r).c_str());
  return tsrSuccess;
}

Result streamIsCapturing(void* stream, bool* capturing) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status);
  if (e != cudaSuccess)
    return TSR_FAIL(tsrUnhandledCudaError, "cudaStreamIsCapturing (stream %p) failed: %s", stream,
                    cudaErrorText(e).c_str());
  // An invalidated capture still records (and then refuses) what is launched on the stream; it is
  // not eager execution, so it counts as capturing.
  *capturing = status != cudaStreamCaptureStatusNone;
  return tsrSuccess;
}

#else  // !TESSERA_HAVE_CUDA

namespace {
constexpr const char* kNoCuda =
    "CUDA was not built in (tessera was configured without a CUDA compiler)";
}  // namespace

bool streamMemOpsAvailable(std::string* why) {
  if (why != nullptr) *why = std::string("stream memory operations are unavailable: ") + kNoCuda;
  return false;
}

Result streamWaitValue32(void*, uint32_t*, uint32_t, bool) {
  return TSR_FAIL(tsrInvalidUsage, "cannot make a stream wait on a value: %s", kNoCuda);
}

Result streamWriteValue32(void*, uint32_t*, uint32_t) {
  return TSR_FAIL(tsrInvalidUsage, "cannot make a stream write a value: %s", kNoCuda);
}

Result streamIsCapturing(void*, bool*) {
  return TSR_FAIL(tsrInvalidUsage, "cannot ask whether a stream is capturing: %s", kNoCuda);
}

#endif

}  // namespace tessera::exec
