// The workload simulator's readers (tessera_sim --workload FILE and --kernel-times FILE): bytes a
// user hands over. Garbage must be tsrInvalidArgument. A workload that reads must write back to
// JSON that reads to the same JSON; kernel times that read hold only positive, finite times.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "workload/kernel_times.hpp"
#include "workload/workload.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  using namespace tessera::workload;
  std::string text(reinterpret_cast<const char*>(data), size);
  Workload w;
  Result r = workloadFromJson(text, "fuzz.json", &w);
  if (r == tsrSuccess) {
    const std::string once = workloadToJson(w);
    Workload again;
    if (workloadFromJson(once, "again.json", &again) != tsrSuccess)
      fuzz::broken("a workload's own JSON does not read back");
    if (workloadToJson(again) != once) fuzz::broken("a workload's JSON reads back to another");
  } else if (r != tsrInvalidArgument) {
    fuzz::broken("workloadFromJson: unexpected code");
  }
  KernelTimes kt;
  r = kernelTimesFromJson(text, "measured.json", &kt);
  if (r == tsrSuccess) {
    for (const auto& [key, us] : kt.gemmUs)
      if (!(std::isfinite(us) && us > 0)) fuzz::broken("a GEMM time that is not positive");
    for (const auto& [key, us] : kt.memoryUs)
      if (!(std::isfinite(us) && us > 0)) fuzz::broken("a memory time that is not positive");
  } else if (r != tsrInvalidArgument) {
    fuzz::broken("kernelTimesFromJson: unexpected code");
  }
  return 0;
}
