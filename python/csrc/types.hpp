// What the backend maps between torch and tessera's C API: dtypes, reduce ops, and tessera's
// results as Python exceptions carrying tessera's sentence.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <tessera/tessera.h>

#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace tessera_torch {

// The exception for a failed tessera call: ValueError for bad input (tsrInvalidArgument,
// tsrInvalidUsage), DistBackendError for everything else (torch.distributed.DistBackendError, a
// RuntimeError), each with "tessera: " and the sentence of tsrGetLastError.
[[noreturn]] void throwResult(tsrResult_t result, const std::string& sentence);
// Checks a tessera call made on this thread: throws with tsrGetLastError's sentence on failure.
void check(tsrResult_t result, const char* what);
// A failed call as an exception_ptr (for Work objects that fail later).
std::exception_ptr resultException(tsrResult_t result, const std::string& sentence);

// The tessera dtype that moves a torch dtype's elements as they are (a reduction works on them).
// std::nullopt where tessera has no such type (int16, uint16, complex, ...).
std::optional<tsrDataType_t> reduceType(at::ScalarType t);

// A reduction of `t` tensors with `op`: tessera's type and op, checked as Gloo checks them
// (bitwise ops are refused; bool maps sum/prod to max/min, i.e. or/and, as Gloo computes them).
// PREMUL_SUM makes a tessera op over `comm` (tsrRedOpCreatePreMulSum with the factor); the caller
// destroys it with ReduceSpec::release. Throws ValueError with a sentence when tessera cannot
// reduce this dtype with this op.
struct ReduceSpec {
  tsrDataType_t dtype = tsrFloat32;
  tsrRedOp_t op = tsrSum;
  bool premul = false;  // op is a tsrRedOpCreatePreMulSum handle of `comm`
  tsrComm_t comm = nullptr;
  at::Tensor factor;  // PREMUL_SUM's factor in the reduction's type
  void release();
};
// Validation only (on the calling thread, before anything is queued).
void checkReduce(at::ScalarType t, const c10d::ReduceOp& op, const char* api);
// Creates the op on `comm` (on the thread that runs the call: the factor is read then).
ReduceSpec makeReduce(at::ScalarType t, const c10d::ReduceOp& op, tsrComm_t comm, bool onDevice);

// A tessera group that is always closed, also when a call inside it throws (tessera noted the
// failed call, so closing the group starts nothing of it).
class TsrGroup {
 public:
  TsrGroup() { check(tsrGroupStart(), "tsrGroupStart"); }
  ~TsrGroup() {
    if (open_) tsrGroupEnd();
  }
  TsrGroup(const TsrGroup&) = delete;
  TsrGroup& operator=(const TsrGroup&) = delete;
  void end() {
    open_ = false;
    check(tsrGroupEnd(), "tsrGroupEnd");
  }

 private:
  bool open_ = true;
};

// The bytes of a tensor as tessera moves them for non-reducing calls (any dtype).
inline size_t tensorBytes(const at::Tensor& t) { return t.numel() * t.element_size(); }

// "float32", "int64", ...: torch's names, for sentences.
std::string dtypeName(at::ScalarType t);
// "SUM", "PREMUL_SUM", ...
std::string reduceOpName(const c10d::ReduceOp& op);
// A call as TESSERA_TORCH_CHECK_CALLS compares it between ranks: "allreduce float32[1000] SUM".
std::string callSignature(const char* api, const at::Tensor& t, const std::string& extra = "");

// Argument checks, on the calling thread before anything is queued; each throws ValueError with
// "<api>: <what>".
[[noreturn]] void bad(const std::string& api, const std::string& what);
// Defined, strided, and on the CPU or a CUDA device.
void checkTensor(const at::Tensor& t, const char* api);
// `b` passes checkTensor and has `a`'s device and dtype (and its element count if sameNumel).
void sameKind(const at::Tensor& a, const at::Tensor& b, const char* api, bool sameNumel = false);
// 0 <= r < n; `what` names the argument ("root", "destination").
void checkRank(int64_t r, int n, const char* what, const char* api);

}  // namespace tessera_torch
