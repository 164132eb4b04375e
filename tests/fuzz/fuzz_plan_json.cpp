// planFromJson: plan files (tessera_plan, --plan of the perf binaries). Garbage must be
// tsrInvalidArgument. A plan that reads must write back to JSON that reads to the same plan, and
// the verifier (which the tools run on every plan they read) must answer for it.
#include <cstdint>
#include <string>

#include "collectives/plan/plan_json.hpp"
#include "collectives/plan/verifier.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string text(reinterpret_cast<const char*>(data), size);
  Plan plan;
  Result r = planFromJson(text, "fuzz.json", &plan);
  if (r != tsrSuccess) {
    if (r != tsrInvalidArgument) fuzz::broken("planFromJson: unexpected code");
    return 0;
  }
  std::string once, twice;
  if (planToJson(plan, &once, false) != tsrSuccess) fuzz::broken("a plan that read does not write");
  Plan again;
  if (planFromJson(once, "again.json", &again) != tsrSuccess)
    fuzz::broken("a plan's own JSON does not read back");
  if (planToJson(again, &twice, false) != tsrSuccess || twice != once)
    fuzz::broken("a plan's JSON reads back to another plan");
  (void)showPlan(plan);
  VerifyReport report;
  VerifyOptions options;
  options.iterations = 1;
  Result v = verifyPlan(plan, &report, options);
  if (v != tsrSuccess && v != tsrInvalidArgument) fuzz::broken("verifyPlan: unexpected code");
  return 0;
}
