// tsrAllGather, tsrBroadcast and tsrAlltoAll over thread ranks: every datatype x family x in
// place / out of place (not alltoall) x counts 0, 1, 7 (broadcast: roots vary with the case);
// the data is random bytes, which must arrive exactly.
#include <gtest/gtest.h>

#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

class DataMatrix : public ::testing::TestWithParam<std::tuple<Collective, int>> {};

TEST_P(DataMatrix, EveryDatatypeAndFamily) {
  setTestEnvironment();
  const auto [coll, n] = GetParam();
  for (const std::string& f : runFamilies(coll, n, {0, 1, 7})) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DataMatrix,
                         ::testing::Combine(::testing::Values(Collective::kAllGather,
                                                              Collective::kBroadcast,
                                                              Collective::kAllToAll),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)),
                         [](const auto& p) {
                           return std::string(collectiveName(std::get<0>(p.param))) + "_n" +
                                  std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace tessera::apitest
