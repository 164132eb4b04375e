// The serial double-precision reference of the fused ops, for every test of the fused layer (host
// executor, API, MPI, GPU): deterministic inputs that every rank can regenerate for every other
// rank, GEMM followed by the collective in double, and a comparison with an error bound per
// element written down from the types involved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fused/fused.hpp"
#include "tessera/tessera.h"

namespace tessera::fusedtest {

// One fused call of a test. n / k are the base sizes; ranks differ where the semantics allow it
// (rankN / rankK), so uneven splits are covered.
struct FusedCase {
  fused::FusedOp op = fused::FusedOp::kGemmReduceScatter;
  uint64_t m = 0;
  uint64_t n = 0;  // N (ReduceScatter, AllReduce) or the base N_r (AllGather)
  uint64_t k = 0;  // the base K_r (ReduceScatter, AllReduce) or K (AllGather)
  tsrDataType_t inType = tsrFloat32;
  tsrDataType_t outType = tsrFloat32;
  bool bias = false;
  bool atomic = false;
  bool gatheredA = false;  // AllGather only
  uint64_t seed = 1;
  bool unevenSplit = true;  // K_r / N_r vary with the rank (else all equal n / k)
};

// The shape rank `rank` passes (columns of its C, its inner dimension).
uint64_t rankN(const FusedCase& c, int rank);
uint64_t rankK(const FusedCase& c, int rank);
fused::FusedShape rankShape(const FusedCase& c, int rank, int nranks);

// "gemm_reducescatter n=4 M=24 N=20 K=9 float16->bfloat16 bias atomic seed=3".
std::string describe(const FusedCase& c, int nranks);

// Rank `rank`'s inputs, stored in the case's types: A (RS/AR: M x K_r; AG: M/n x K), B (K_r x N
// or K x N_r), and bias (N elements of the output type; RS/AR: the same on every rank).
struct RankInputs {
  std::vector<uint8_t> a, b, bias;
};
RankInputs makeInputs(const FusedCase& c, int rank, int nranks);

// The decoded value of element i of an array of `type` (float32, float16, bfloat16).
double elementValue(tsrDataType_t type, const void* data, uint64_t i);

// What rank `rank` must receive in C: the value in double of GEMM followed by the collective on
// the stored inputs, and for each element the error the float executor may make.
struct Expected {
  uint64_t rows = 0, cols = 0;
  std::vector<double> value;
  std::vector<double> bound;
};
Expected reference(const FusedCase& c, int rank, int nranks);

// "" when every element of `got` (rows x cols of the output type) is within its bound, else a
// sentence naming the first bad element and the count of bad ones.
std::string compare(const FusedCase& c, int rank, int nranks, const void* got,
                    const Expected& expected);

// AllGather: the gathered A (M x K of the input type) every rank must receive, bit for bit.
std::vector<uint8_t> gatheredA(const FusedCase& c, int nranks);

}  // namespace tessera::fusedtest
