// Measured kernel times (kernel_times.hpp).
#include "workload/kernel_times.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/log.hpp"
#include "core/text_file.hpp"

namespace tessera::workload {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
using Json = nlohmann::json;

// A positive integer of the key, or 0.
uint64_t dim(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() > 0) return static_cast<uint64_t>(v.get<int64_t>());
  return 0;
}
}  // namespace

double KernelTimes::find(const Op& op) const {
  if (op.kind == OpKind::kGemm) {
    if (op.gemm.dtype != DType::kBf16 && op.gemm.dtype != DType::kFp16) return -1;
    auto it = gemmUs.find({op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.batch});
    return it == gemmUs.end() ? -1 : it->second;
  }
  if (op.kind == OpKind::kMemory && op.bytes >= 1) {
    auto it = memoryUs.find(static_cast<uint64_t>(op.bytes));
    return it == memoryUs.end() ? -1 : it->second;
  }
  return -1;
}

Result kernelTimesFromJson(const std::string& text, const std::string& where, KernelTimes* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "kernel times: no output");
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return TSR_FAIL(tsrInvalidArgument,
                    "%s is not JSON (perf/gpu_model_check.py measure writes it)", where.c_str());
  if (!j.is_object() || !j.contains("ops") || !j["ops"].is_array())
    return TSR_FAIL(tsrInvalidArgument,
                    "%s has no \"ops\" array: not a measured.json of perf/gpu_model_check.py",
                    where.c_str());
  KernelTimes kt;
  if (j.contains("device") && j["device"].is_string()) kt.device = j["device"].get<std::string>();
  std::map<std::array<uint64_t, 4>, std::pair<double, int>> gemm;
  std::map<uint64_t, std::pair<double, int>> memory;
  const Json& ops = j["ops"];
  for (size_t i = 0; i < ops.size(); ++i) {
    const Json& e = ops[i];
    if (!e.is_object() || !e.contains("key") || !e["key"].is_array() || e["key"].empty() ||
        !e["key"][0].is_string())
      return TSR_FAIL(tsrInvalidArgument,
                      "%s: ops[%zu] has no key [\"gemm\", m, n, k, batch] or "
                      "[\"memory\", bytes]",
                      where.c_str(), i);
    if (!e.contains("us") || !e["us"].is_array() || e["us"].empty() || !e["us"][0].is_number())
      return TSR_FAIL(tsrInvalidArgument, "%s: ops[%zu] has no \"us\" [median, min, max]",
                      where.c_str(), i);
    const double us = e["us"][0].get<double>();
    if (!std::isfinite(us) || us <= 0)
      return TSR_FAIL(tsrInvalidArgument, "%s: ops[%zu]'s median %g us is not a positive time",
                      where.c_str(), i, us);
    const Json& key = e["key"];
    const std::string kind = key[0].get<std::string>();
    if (kind == "gemm") {
      std::array<uint64_t, 4> k{};
      bool ok = key.size() == 5;
      for (size_t d = 0; ok && d < 4; ++d) ok = (k[d] = dim(key[d + 1])) > 0;
      if (!ok)
        return TSR_FAIL(tsrInvalidArgument,
                        "%s: ops[%zu]'s gemm key is not [\"gemm\", m, n, k, "
                        "batch] of positive integers",
                        where.c_str(), i);
      auto& acc = gemm[k];
      acc.first += us;
      acc.second += 1;
    } else if (kind == "memory") {
      const uint64_t b = key.size() == 2 ? dim(key[1]) : 0;
      if (b == 0)
        return TSR_FAIL(tsrInvalidArgument, "%s: ops[%zu]'s memory key is not [\"memory\", bytes]",
                        where.c_str(), i);
      auto& acc = memory[b];
      acc.first += us;
      acc.second += 1;
    } else {
      return TSR_FAIL(tsrInvalidArgument, "%s: ops[%zu] has an unknown kind \"%s\" (gemm, memory)",
                      where.c_str(), i, kind.c_str());
    }
  }
  for (const auto& [k, acc] : gemm) kt.gemmUs[k] = acc.first / acc.second;
  for (const auto& [b, acc] : memory) kt.memoryUs[b] = acc.first / acc.second;
  *out = std::move(kt);
  return tsrSuccess;
}

Result readKernelTimesFile(const std::string& path, KernelTimes* out) {
  std::string text;
  TSR_CHECK(readTextFile(path, "the kernel times", &text));
  return kernelTimesFromJson(text, path, out);
}

}  // namespace tessera::workload
