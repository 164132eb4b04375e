// tsrAllReduce over thread ranks: every datatype x op x family x in place / out of place x
// counts 0, 1, 7, checked against a serial reference (test_api_common.hpp).
#include <gtest/gtest.h>

#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

class AllReduceMatrix : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceMatrix, EveryDatatypeOpAndFamily) {
  setTestEnvironment();
  const int n = GetParam();
  for (const std::string& f : runFamilies(Collective::kAllReduce, n, {0, 1, 7})) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllReduceMatrix, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& p) { return "n" + std::to_string(p.param); });

}  // namespace
}  // namespace tessera::apitest
