// tsrReduceScatter and tsrReduce over thread ranks: every datatype x op x family x in place /
// out of place x counts 0, 1, 7 (reduce: roots vary with the case), against a serial reference.
#include <gtest/gtest.h>

#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

class ReducingMatrix : public ::testing::TestWithParam<std::tuple<Collective, int>> {};

TEST_P(ReducingMatrix, EveryDatatypeOpAndFamily) {
  setTestEnvironment();
  const auto [coll, n] = GetParam();
  for (const std::string& f : runFamilies(coll, n, {0, 1, 7})) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReducingMatrix,
                         ::testing::Combine(::testing::Values(Collective::kReduceScatter,
                                                              Collective::kReduce),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)),
                         [](const auto& p) {
                           return std::string(collectiveName(std::get<0>(p.param))) + "_n" +
                                  std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace tessera::apitest
