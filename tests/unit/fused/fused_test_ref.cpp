// The serial double-precision reference of the fused ops (fused_test_ref.hpp).
#include "fused_test_ref.hpp"

#include <cmath>
#include <cstring>

#include "core/datatype.hpp"
#include "core/float_convert.hpp"
#include "core/status.hpp"

namespace tessera::fusedtest {
namespace {

using fused::FusedOp;

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A value in [-1, 1) with a full float mantissa, so storing it in a narrow type rounds.
float inputValue(uint64_t seed, int rank, int which, uint64_t i) {
  uint64_t h = mix(mix(seed * 0x100000001B3ull + static_cast<uint64_t>(rank)) ^
                   (static_cast<uint64_t>(which) << 56) ^ i);
  return static_cast<float>(static_cast<double>(h >> 40) / static_cast<double>(1ull << 23) - 1.0);
}

std::vector<uint8_t> makeArray(tsrDataType_t type, uint64_t seed, int rank, int which,
                               uint64_t count) {
  std::vector<uint8_t> out(count * dtypeSize(type));
  for (uint64_t i = 0; i < count; ++i) {
    float v = inputValue(seed, rank, which, i);
    switch (type) {
      case tsrFloat16: {
        Float16 h = Float16::fromFloat(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      case tsrBfloat16: {
        BFloat16 h = BFloat16::fromFloat(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      default: std::memcpy(out.data() + 4 * i, &v, 4); break;
    }
  }
  return out;
}

bool reduces(FusedOp op) { return op != FusedOp::kAllGatherGemm; }

// Unit roundoff of the output type's rounding (float's is counted with the accumulation).
double outputRoundoff(tsrDataType_t t) {
  if (t == tsrFloat16) return std::ldexp(1.0, -11);
  if (t == tsrBfloat16) return std::ldexp(1.0, -8);
  return 0;
}

}  // namespace

uint64_t rankN(const FusedCase& c, int rank) {
  return !reduces(c.op) && c.unevenSplit ? c.n + static_cast<uint64_t>(rank % 2) * 5 : c.n;
}
uint64_t rankK(const FusedCase& c, int rank) {
  return reduces(c.op) && c.unevenSplit ? c.k + static_cast<uint64_t>(rank % 3) : c.k;
}
fused::FusedShape rankShape(const FusedCase& c, int rank, int nranks) {
  return fused::FusedShape{c.m, rankN(c, rank), rankK(c, rank)};
}

std::string describe(const FusedCase& c, int nranks) {
  return strprintf("%s n=%d M=%llu N=%llu K=%llu %s->%s%s%s%s seed=%llu", fused::fusedOpName(c.op),
                   nranks, static_cast<unsigned long long>(c.m),
                   static_cast<unsigned long long>(c.n), static_cast<unsigned long long>(c.k),
                   dtypeName(c.inType), dtypeName(c.outType), c.bias ? " bias" : "",
                   c.atomic ? " atomic" : "", c.gatheredA ? " gatheredA" : "",
                   static_cast<unsigned long long>(c.seed));
}

RankInputs makeInputs(const FusedCase& c, int rank, int nranks) {
  RankInputs in;
  const uint64_t n = rankN(c, rank), k = rankK(c, rank);
  const uint64_t aRows = reduces(c.op) ? c.m : c.m / static_cast<uint64_t>(nranks);
  in.a = makeArray(c.inType, c.seed, rank, 0, aRows * k);
  in.b = makeArray(c.inType, c.seed, rank, 1, k * n);
  // The reducing ops add the bias once, so every rank passes the same one.
  if (c.bias) in.bias = makeArray(c.outType, c.seed, reduces(c.op) ? 0 : rank, 2, n);
  return in;
}

double elementValue(tsrDataType_t type, const void* data, uint64_t i) {
  switch (type) {
    case tsrFloat16: return toFloat(static_cast<const Float16*>(data)[i]);
    case tsrBfloat16: return toFloat(static_cast<const BFloat16*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

// The bound per element: the executor sums `terms` products in float (plus the n partials and
// the bias), which errs by at most (terms + n + 2) * 2^-24 * (sum |a||b| + |bias|) (recursive
// summation, Higham's gamma bound); rounding the result to a half type adds half an ulp,
// 2^-11 (float16) or 2^-8 (bfloat16) relative, and float16's subnormal step 2^-25 absolute.
Expected reference(const FusedCase& c, int rank, int nranks) {
  Expected e;
  const auto n = static_cast<uint64_t>(nranks);
  const uint64_t segRows = c.m / n;
  std::vector<RankInputs> all;
  for (int q = 0; q < nranks; ++q) all.push_back(makeInputs(c, q, nranks));
  const RankInputs& mine = all[static_cast<size_t>(rank)];
  e.rows = c.op == FusedOp::kGemmReduceScatter ? segRows : c.m;
  e.cols = rankN(c, rank);
  const uint64_t firstRow = c.op == FusedOp::kGemmReduceScatter ? rank * segRows : 0;
  e.value.assign(e.rows * e.cols, 0.0);
  e.bound.assign(e.rows * e.cols, 0.0);
  std::vector<double> mag(e.rows * e.cols, 0.0);
  uint64_t terms = 0;

  auto gemm = [&](const std::vector<uint8_t>& a, uint64_t aFirstRow, uint64_t rows, uint64_t k,
                  const std::vector<uint8_t>& b, uint64_t outFirstRow) {
    for (uint64_t i = 0; i < rows; ++i) {
      for (uint64_t kk = 0; kk < k; ++kk) {
        double x = elementValue(c.inType, a.data(), (aFirstRow + i) * k + kk);
        for (uint64_t j = 0; j < e.cols; ++j) {
          double y = elementValue(c.inType, b.data(), kk * e.cols + j);
          e.value[(outFirstRow + i) * e.cols + j] += x * y;
          mag[(outFirstRow + i) * e.cols + j] += std::fabs(x * y);
        }
      }
    }
  };
  if (reduces(c.op)) {
    for (int q = 0; q < nranks; ++q) {
      const uint64_t k = rankK(c, q);
      gemm(all[static_cast<size_t>(q)].a, firstRow, e.rows, k, all[static_cast<size_t>(q)].b, 0);
      terms += k;
    }
  } else {
    for (int q = 0; q < nranks; ++q)
      gemm(all[static_cast<size_t>(q)].a, 0, segRows, c.k, mine.b, q * segRows);
    terms = c.k;
  }
  const double u = std::ldexp(1.0, -24), uo = outputRoundoff(c.outType);
  const double absFloor = c.outType == tsrFloat16 ? std::ldexp(1.0, -25) : 0.0;
  for (uint64_t i = 0; i < e.rows; ++i) {
    for (uint64_t j = 0; j < e.cols; ++j) {
      const uint64_t x = i * e.cols + j;
      if (c.bias) {
        double b = elementValue(c.outType, mine.bias.data(), j);
        e.value[x] += b;
        mag[x] += std::fabs(b);
      }
      const double acc = static_cast<double>(terms + n + 2) * u * mag[x];
      e.bound[x] = acc + uo * (std::fabs(e.value[x]) + acc) + absFloor;
    }
  }
  return e;
}

std::string compare(const FusedCase& c, int rank, int nranks, const void* got,
                    const Expected& expected) {
  uint64_t bad = 0, first = 0;
  for (uint64_t x = 0; x < expected.rows * expected.cols; ++x) {
    double v = elementValue(c.outType, got, x);
    if (!(std::fabs(v - expected.value[x]) <= expected.bound[x])) {
      if (bad++ == 0) first = x;
    }
  }
  if (bad == 0) return "";
  const uint64_t i = first / expected.cols, j = first % expected.cols;
  return strprintf(
      "%s rank %d: %llu of %llu elements of C wrong; first C[%llu][%llu] = %.9g, "
      "expected %.9g (bound %.3g)",
      describe(c, nranks).c_str(), rank, static_cast<unsigned long long>(bad),
      static_cast<unsigned long long>(expected.rows * expected.cols),
      static_cast<unsigned long long>(i), static_cast<unsigned long long>(j),
      elementValue(c.outType, got, first), expected.value[first], expected.bound[first]);
}

std::vector<uint8_t> gatheredA(const FusedCase& c, int nranks) {
  std::vector<uint8_t> out;
  for (int q = 0; q < nranks; ++q) {
    RankInputs in = makeInputs(c, q, nranks);
    out.insert(out.end(), in.a.begin(), in.a.end());
  }
  return out;
}

}  // namespace tessera::fusedtest
