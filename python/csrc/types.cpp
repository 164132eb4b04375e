#include "types.hpp"

#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>

namespace tessera_torch {
namespace {

std::string message(const std::string& sentence) { return "tessera: " + sentence; }

bool isBitwise(c10d::ReduceOp::RedOpType op) {
  return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

std::exception_ptr resultException(tsrResult_t result, const std::string& sentence) {
  try {
    throwResult(result, sentence);
  } catch (...) {
    return std::current_exception();
  }
}

void throwResult(tsrResult_t result, const std::string& sentence) {
  std::string msg = message(sentence.empty() ? tsrGetErrorString(result) : sentence);
  if (result == tsrInvalidArgument || result == tsrInvalidUsage) C10_THROW_ERROR(ValueError, msg);
  C10_THROW_ERROR(DistBackendError, msg);
}

void check(tsrResult_t result, const char* what) {
  if (result == tsrSuccess) return;
  std::string sentence = tsrGetLastError(nullptr);
  if (sentence.empty()) sentence = std::string(what) + ": " + tsrGetErrorString(result);
  throwResult(result, sentence);
}

std::string dtypeName(at::ScalarType t) {
  // torch.float32 and friends, as a Python user writes them.
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kByte: return "uint8";
    case at::kChar: return "int8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kBool: return "bool";
    case at::kFloat8_e4m3fn: return "float8_e4m3fn";
    case at::kFloat8_e5m2: return "float8_e5m2";
    default: return c10::toString(t);
  }
}

std::string reduceOpName(const c10d::ReduceOp& op) { return opName(op.op_); }

std::string callSignature(const char* api, const at::Tensor& t, const std::string& extra) {
  std::string s =
      std::string(api) + " " + dtypeName(t.scalar_type()) + "[" + std::to_string(t.numel()) + "]";
  return extra.empty() ? s : s + " " + extra;
}

std::optional<tsrDataType_t> reduceType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return tsrFloat32;
    case at::kDouble: return tsrFloat64;
    case at::kHalf: return tsrFloat16;
    case at::kBFloat16: return tsrBfloat16;
    case at::kChar: return tsrInt8;
    case at::kByte: return tsrUint8;
    case at::kBool: return tsrUint8;  // 0 / 1 bytes; sum and product become or and and
    case at::kInt: return tsrInt32;
    case at::kLong: return tsrInt64;
    case at::kUInt32: return tsrUint32;
    case at::kUInt64: return tsrUint64;
    case at::kFloat8_e4m3fn: return tsrFloat8e4m3;
    case at::kFloat8_e5m2: return tsrFloat8e5m2;
    default: return std::nullopt;
  }
}

void checkReduce(at::ScalarType t, const c10d::ReduceOp& op, const char* api) {
  const auto kind = op.op_;
  if (isBitwise(kind))
    C10_THROW_ERROR(ValueError, message(std::string(api) + ": ReduceOp." + opName(kind) +
                                        " is not a reduction tessera has (it has SUM, AVG, "
                                        "PRODUCT, MIN, MAX and PREMUL_SUM)"));
  if (kind == c10d::ReduceOp::UNUSED)
    C10_THROW_ERROR(ValueError, message(std::string(api) + ": ReduceOp.UNUSED is not an op"));
  if (!reduceType(t))
    C10_THROW_ERROR(ValueError,
                    message(std::string(api) + ": tessera cannot reduce " + dtypeName(t) +
                            " tensors (it reduces float32, float64, float16, "
                            "bfloat16, float8_e4m3fn, float8_e5m2, int8, uint8, "
                            "int32, int64, uint32, uint64 and bool)"));
  if (t == at::kBool && (kind == c10d::ReduceOp::AVG || kind == c10d::ReduceOp::PREMUL_SUM))
    C10_THROW_ERROR(ValueError, message(std::string(api) + ": ReduceOp." + opName(kind) +
                                        " has no meaning on bool tensors"));
  if (kind == c10d::ReduceOp::PREMUL_SUM) {
    auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    if (sup == nullptr)
      C10_THROW_ERROR(ValueError, message(std::string(api) +
                                          ": ReduceOp.PREMUL_SUM without its factor (make it "
                                          "with torch.distributed._make_nccl_premul_sum)"));
  }
}

void ReduceSpec::release() {
  if (premul && comm != nullptr) tsrRedOpDestroy(op, comm);
  premul = false;
}

ReduceSpec makeReduce(at::ScalarType t, const c10d::ReduceOp& op, tsrComm_t comm, bool onDevice) {
  ReduceSpec spec;
  spec.dtype = *reduceType(t);
  spec.comm = comm;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: spec.op = t == at::kBool ? tsrMax : tsrSum; break;
    case c10d::ReduceOp::PRODUCT: spec.op = t == at::kBool ? tsrMin : tsrProd; break;
    case c10d::ReduceOp::MIN: spec.op = tsrMin; break;
    case c10d::ReduceOp::MAX: spec.op = tsrMax; break;
    case c10d::ReduceOp::AVG: spec.op = tsrAvg; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      // The factor in the reduction's own type, read now (host) or when the call runs (device).
      at::Tensor factor;
      tsrScalarResidence_t residence = tsrScalarHostImmediate;
      if (sup->tensor_factor.defined()) {
        factor = sup->tensor_factor.reshape({1});
        if (onDevice && factor.is_cuda()) {
          residence = tsrScalarDevice;
          factor = factor.to(t);
        } else {
          factor = factor.to(at::kCPU).to(t);
        }
      } else {
        factor = at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(t)).reshape({1});
      }
      check(tsrRedOpCreatePreMulSum(&spec.op, factor.data_ptr(), spec.dtype, residence, comm),
            "tsrRedOpCreatePreMulSum");
      spec.premul = true;
      spec.factor = factor;  // a device factor is read when the call runs
      break;
    }
    default: C10_THROW_ERROR(ValueError, message("unsupported reduce op"));
  }
  return spec;
}

// Argument checks shared by the calls (types.hpp).
[[noreturn]] void bad(const std::string& api, const std::string& what) {
  throwResult(tsrInvalidArgument, api + ": " + what);
}

void checkTensor(const at::Tensor& t, const char* api) {
  if (!t.defined()) bad(api, "a tensor is undefined");
  if (t.layout() != at::kStrided)
    bad(api, "sparse and other non-strided tensors are not supported by tessera");
  if (!t.is_cpu() && !t.is_cuda())
    bad(api, "tensors on " + t.device().str() +
                 " are not supported (tessera takes CPU and CUDA tensors)");
}

void sameKind(const at::Tensor& a, const at::Tensor& b, const char* api, bool sameNumel) {
  checkTensor(b, api);
  if (a.device() != b.device())
    bad(api, "tensors on " + a.device().str() + " and " + b.device().str() +
                 ": a call's tensors must be on one device");
  if (a.scalar_type() != b.scalar_type())
    bad(api, "tensors of " + dtypeName(a.scalar_type()) + " and " + dtypeName(b.scalar_type()) +
                 ": a call's tensors must have one dtype");
  if (sameNumel && a.numel() != b.numel())
    bad(api, "tensors of " + std::to_string(a.numel()) + " and " + std::to_string(b.numel()) +
                 " elements where they must have the same size");
}

void checkRank(int64_t r, int n, const char* what, const char* api) {
  if (r < 0 || r >= n)
    bad(api,
        std::string(what) + " " + std::to_string(r) + " is outside [0, " + std::to_string(n) + ")");
}

}  // namespace tessera_torch
