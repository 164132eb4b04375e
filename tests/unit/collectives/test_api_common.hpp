// Shared by the collective API tests (test_api_*.cpp): thread-rank communicators, input values,
// serial references computed in higher precision (double, or 64-bit integers wrapping as the
// datatype does), and a driver that runs a list of calls on every rank and checks each one.
//
// Tolerances for floating-point reductions (every narrow step rounds once, reduce_op.hpp): with
// p the significand bits of the type (float16 11, bfloat16 8, float32 24, float64 53, e4m3 4,
// e5m2 3), u = 2^-p the unit roundoff and S the sum of the magnitudes of the (pre-multiplied)
// terms, in any order of additions:
//   sum, premulsum   |got - ref| <= (n + 1) * u * S      (n - 1 additions and the pre-multiply
//                                                         each round by at most u * S; + slack)
//   avg              |got - ref| <= (n + 2) * u * S / n  (one more rounding: the division)
//   prod             |got - ref| <= (n + 1) * u * |ref|
//   max, min         exact; integers: exact for every op.
// Inputs keep every result far from overflow and underflow: multiples of 0.5 in [-4, 4] for
// sums, +-0.5, +-1, +-2 for products; integers take any value (their ops wrap).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/plan/plan.hpp"
#include "core/reduce_op.hpp"
#include "tessera/tessera.h"

namespace tessera::apitest {

// Every datatype, for the matrix.
std::vector<tsrDataType_t> allDatatypes();
// Every op kind (sum, prod, max, min, avg, premulsum).
std::vector<RedKind> allOps();
// The families that generate `c` and need no second host (thread ranks share one host).
std::vector<std::string> familiesFor(Collective c);

// One call of the matrix.
struct Spec {
  Collective coll = Collective::kAllReduce;
  tsrDataType_t dtype = tsrFloat32;
  RedKind op = RedKind::kSum;
  std::string algorithm;  // "" lets the tuner choose
  bool inPlace = false;
  size_t count = 0;
  int root = 0;
  uint64_t seed = 1;
  // Run the call twice (the second time on the initial buffers again): the results must be the
  // same bytes.
  bool repeat = false;
};
std::string describe(const Spec& s, int nranks);

// What one rank must hold after the call.
struct Expect {
  size_t offset = 0;               // bytes into the receive buffer
  std::vector<uint8_t> bytes;      // exact bytes (when `values` is empty)
  std::vector<double> values;      // floating-point reductions: the reference per element
  std::vector<double> tolerances;  // and its allowed error
};

// The buffers of one call on every rank and the expected results.
struct Case {
  Spec spec;
  int nranks = 1;
  std::vector<std::vector<uint8_t>> send;      // per rank; unused when in place
  std::vector<std::vector<uint8_t>> sendCopy;  // what send held: out-of-place calls keep it
  std::vector<std::vector<uint8_t>> recv;      // per rank; in place: holds the input
  std::vector<std::vector<uint8_t>> recvInit;  // spec.repeat: what recv held
  // Per rank (ranks that must hold the same result share one: large calls stay affordable).
  std::vector<std::shared_ptr<const Expect>> expect;
};
Case makeCase(const Spec& spec, int nranks);

// Per rank: the premulsum op of each datatype (scalar 3 for integers, 1.5 for floats).
struct RankOps {
  std::array<tsrRedOp_t, tsrNumTypes> preMul{};
};
tsrResult_t createRankOps(tsrComm_t comm, RankOps* ops);
void destroyRankOps(tsrComm_t comm, const RankOps& ops);

// Runs rank `rank`'s part of the case through the C API.
tsrResult_t runCase(tsrComm_t comm, int rank, Case& c, const RankOps& ops);
// "" when the rank's buffers hold what they should; else the first differences.
std::string checkCase(const Case& c, int rank);

// Forces a family (or the tuner, with "") for every later collective of this rank.
void setAlgorithm(tsrComm_t comm, const std::string& algorithm);

// n host ranks of one communicator (tsrCommInitAll), destroyed with the object.
class ThreadComms {
 public:
  explicit ThreadComms(int n);
  ~ThreadComms();
  ThreadComms(const ThreadComms&) = delete;
  ThreadComms& operator=(const ThreadComms&) = delete;
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int size() const { return static_cast<int>(comms_.size()); }
  tsrComm_t operator[](int r) const { return comms_[static_cast<size_t>(r)]; }

 private:
  std::vector<tsrComm_t> comms_;
  bool ok_ = false;
  std::string error_;
};

// Runs every case, in order, on every rank of `comms` (one thread per rank) and checks each.
// Returns the failures; a rank whose call fails stops there (its peers then time out, which the
// environment keeps short).
std::vector<std::string> runMatrix(const ThreadComms& comms, std::vector<Case>& cases,
                                   double deadlineSeconds);

// The seed of the random samples: TESSERA_TEST_SEED when set, else `fallback`; printed.
uint64_t testSeed(uint64_t fallback);

// The cases of the full matrix for one collective and family on nranks: every datatype x op
// (reducing collectives) x in place / out of place (not alltoall) x count, roots varying.
std::vector<Case> matrixCases(Collective c, const std::string& family, int nranks,
                              const std::vector<size_t>& counts);

// The matrix of `c` on nranks for every family of familiesFor(c), each on fresh communicators
// (a failed call ends its communicator's engine; the other families still run). Returns the
// failures.
std::vector<std::string> runFamilies(Collective c, int nranks, const std::vector<size_t>& counts);

// Sets the environment every API test runs with (short transport deadline, small scratch so
// large calls are pipelined); call before making communicators.
void setTestEnvironment();

}  // namespace tessera::apitest
