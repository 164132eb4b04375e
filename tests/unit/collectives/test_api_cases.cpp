// The cases of the API tests: inputs, serial references and checks (test_api_common.hpp).
#include <cmath>
#include <cstdio>
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "core/datatype.hpp"
#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

constexpr uint8_t kSentinel = 0xa5;

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t randomAt(uint64_t seed, int rank, size_t i) {
  return mix(seed ^ mix(static_cast<uint64_t>(rank) * 0x1000003ull + i * 0x9e37ull + 17));
}

// Significand bits, implicit bit included.
int significandBits(tsrDataType_t dt) {
  switch (dt) {
    case tsrFloat16: return 11;
    case tsrBfloat16: return 8;
    case tsrFloat32: return 24;
    case tsrFloat64: return 53;
    case tsrFloat8e4m3: return 4;
    case tsrFloat8e5m2: return 3;
    default: return 64;
  }
}

bool isSigned(tsrDataType_t dt) { return dt == tsrInt8 || dt == tsrInt32 || dt == tsrInt64; }

uint64_t loadBits(const uint8_t* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little endian
  return v;
}

void storeBits(uint8_t* p, size_t size, uint64_t v) { std::memcpy(p, &v, size); }

int64_t signExtend(uint64_t v, size_t size) {
  if (size == 8) return static_cast<int64_t>(v);
  const unsigned shift = static_cast<unsigned>(64 - 8 * size);
  return static_cast<int64_t>(v << shift) >> shift;
}

double loadFloat(tsrDataType_t dt, const uint8_t* p) {
  switch (dt) {
    case tsrFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case tsrFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case tsrFloat16: return toFloat(Float16{static_cast<uint16_t>(loadBits(p, 2))});
    case tsrBfloat16: return toFloat(BFloat16{static_cast<uint16_t>(loadBits(p, 2))});
    case tsrFloat8e4m3: return toFloat(Float8E4M3{p[0]});
    case tsrFloat8e5m2: return toFloat(Float8E5M2{p[0]});
    default: return 0;
  }
}

// `v` must be representable in dt (every input and scalar here is).
void storeFloat(tsrDataType_t dt, uint8_t* p, double v) {
  const auto f = static_cast<float>(v);
  switch (dt) {
    case tsrFloat32: std::memcpy(p, &f, 4); break;
    case tsrFloat64: std::memcpy(p, &v, 8); break;
    case tsrFloat16: storeBits(p, 2, Float16::fromFloat(f).bits); break;
    case tsrBfloat16: storeBits(p, 2, BFloat16::fromFloat(f).bits); break;
    case tsrFloat8e4m3: p[0] = Float8E4M3::fromFloat(f).bits; break;
    case tsrFloat8e5m2: p[0] = Float8E5M2::fromFloat(f).bits; break;
    default: break;
  }
}

constexpr int64_t kIntScalar = 3;
constexpr double kFloatScalar = 1.5;

// Fills `count` input elements of rank `rank` for a reduction (see the header) or any bytes.
void fillInput(const Spec& s, int rank, size_t first, uint8_t* p, size_t count) {
  const size_t size = dtypeSize(s.dtype);
  const bool reduces = collectiveReduces(s.coll);
  for (size_t i = 0; i < count; ++i) {
    uint64_t r = randomAt(s.seed, rank, first + i);
    uint8_t* e = p + i * size;
    if (!reduces || !dtypeIsFloat(s.dtype)) {
      storeBits(e, size, r);  // any bits: copies must be exact, integer ops wrap
    } else if (s.op == RedKind::kProd) {
      static constexpr double kFactors[] = {0.5, 1, 2, -0.5, -1, -2};
      storeFloat(s.dtype, e, kFactors[r % 6]);
    } else {
      storeFloat(s.dtype, e, static_cast<double>(static_cast<int>(r % 17) - 8) / 2);
    }
  }
}

// The reduction over ranks of element `i` of blocks `inputs[q] + offset`, in `out`.
void referenceElement(const Spec& s, const std::vector<const uint8_t*>& inputs, size_t i,
                      Expect* out, uint8_t* exactOut) {
  const size_t size = dtypeSize(s.dtype);
  const auto n = static_cast<int>(inputs.size());
  if (!dtypeIsFloat(s.dtype)) {
    const bool sgn = isSigned(s.dtype);
    uint64_t acc = loadBits(inputs[0] + i * size, size);
    if (s.op == RedKind::kPreMulSum) acc *= static_cast<uint64_t>(kIntScalar);
    for (int q = 1; q < n; ++q) {
      uint64_t x = loadBits(inputs[static_cast<size_t>(q)] + i * size, size);
      switch (s.op) {
        case RedKind::kSum:
        case RedKind::kAvg: acc += x; break;
        case RedKind::kPreMulSum: acc += x * static_cast<uint64_t>(kIntScalar); break;
        case RedKind::kProd: acc *= x; break;
        case RedKind::kMax:
          if (sgn ? signExtend(x, size) > signExtend(acc, size) : x > acc) acc = x;
          break;
        case RedKind::kMin:
          if (sgn ? signExtend(x, size) < signExtend(acc, size) : x < acc) acc = x;
          break;
      }
    }
    if (size < 8) acc &= (uint64_t{1} << (8 * size)) - 1;  // the wrapped value of the type
    if (s.op == RedKind::kAvg) {
      acc = sgn ? static_cast<uint64_t>(signExtend(acc, size) / n) : acc / static_cast<uint64_t>(n);
    }
    storeBits(exactOut, size, acc);
    return;
  }
  double acc = 0, mag = 0;
  const double u = std::ldexp(1.0, -significandBits(s.dtype));  // unit roundoff
  for (int q = 0; q < n; ++q) {
    double x = loadFloat(s.dtype, inputs[static_cast<size_t>(q)] + i * size);
    if (s.op == RedKind::kPreMulSum) x *= kFloatScalar;
    if (q == 0) {
      acc = x;
    } else {
      switch (s.op) {
        case RedKind::kSum:
        case RedKind::kAvg:
        case RedKind::kPreMulSum: acc += x; break;
        case RedKind::kProd: acc *= x; break;
        case RedKind::kMax: acc = std::max(acc, x); break;
        case RedKind::kMin: acc = std::min(acc, x); break;
      }
    }
    mag += std::fabs(x);
  }
  double tol = 0;
  switch (s.op) {
    case RedKind::kSum:
    case RedKind::kPreMulSum: tol = (n + 1) * u * mag; break;
    case RedKind::kAvg:
      acc /= n;
      tol = (n + 2) * u * mag / n;
      break;
    case RedKind::kProd: tol = (n + 1) * u * std::fabs(acc); break;
    default: break;
  }
  out->values.push_back(acc);
  out->tolerances.push_back(tol);
}

// The reduced blocks `inputs[q] + offset` (count elements) as rank's expectation at `recvOffset`.
Expect reduceExpect(const Spec& s, const std::vector<const uint8_t*>& inputs, size_t recvOffset) {
  Expect e;
  e.offset = recvOffset;
  const size_t size = dtypeSize(s.dtype);
  if (!dtypeIsFloat(s.dtype)) e.bytes.resize(s.count * size);
  for (size_t i = 0; i < s.count; ++i)
    referenceElement(s, inputs, i, &e, e.bytes.empty() ? nullptr : e.bytes.data() + i * size);
  return e;
}

}  // namespace

std::vector<tsrDataType_t> allDatatypes() {
  std::vector<tsrDataType_t> out;
  for (int d = 0; d < tsrNumTypes; ++d) out.push_back(static_cast<tsrDataType_t>(d));
  return out;
}

std::vector<RedKind> allOps() {
  return {RedKind::kSum, RedKind::kProd, RedKind::kMax,
          RedKind::kMin, RedKind::kAvg,  RedKind::kPreMulSum};
}

std::vector<std::string> familiesFor(Collective c) {
  std::vector<std::string> out;
  for (const AlgorithmInfo& a : algorithms())
    if (!a.needsHosts && algorithmSupports(a.name, c)) out.emplace_back(a.name);
  return out;
}

std::string describe(const Spec& s, int nranks) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s%s%s %s n=%d count=%zu %s root=%d seed=%llu",
                collectiveName(s.coll), dtypeName(s.dtype), collectiveReduces(s.coll) ? " " : "",
                collectiveReduces(s.coll) ? redKindName(s.op) : "",
                s.algorithm.empty() ? "(tuner)" : s.algorithm.c_str(), nranks, s.count,
                s.inPlace ? "in-place" : "out-of-place", s.root,
                static_cast<unsigned long long>(s.seed));
  return buf;
}

Case makeCase(const Spec& spec, int nranks) {
  Case c;
  c.spec = spec;
  c.nranks = nranks;
  const auto n = static_cast<size_t>(nranks);
  const size_t size = dtypeSize(spec.dtype), block = spec.count * size;
  size_t inElems = spec.count, outBytes = block;
  switch (spec.coll) {
    case Collective::kReduceScatter: inElems = spec.count * n; break;
    case Collective::kAllGather: outBytes = block * n; break;
    case Collective::kAllToAll:
      inElems = spec.count * n;
      outBytes = block * n;
      break;
    default: break;
  }
  std::vector<std::vector<uint8_t>> input(n, std::vector<uint8_t>(inElems * size));
  for (size_t r = 0; r < n; ++r) fillInput(spec, static_cast<int>(r), 0, input[r].data(), inElems);
  c.send.resize(n);
  c.recv.resize(n);
  for (size_t r = 0; r < n; ++r) {
    if (!spec.inPlace) {
      c.send[r] = input[r];
      c.recv[r].assign(outBytes, kSentinel);
      continue;
    }
    switch (spec.coll) {
      case Collective::kAllGather:
        c.recv[r].assign(outBytes, kSentinel);
        if (block > 0) std::memcpy(c.recv[r].data() + r * block, input[r].data(), block);
        break;
      case Collective::kBroadcast:
        c.recv[r] =
            static_cast<int>(r) == spec.root ? input[r] : std::vector<uint8_t>(block, kSentinel);
        break;
      default: c.recv[r] = input[r]; break;  // allreduce, reduce, reducescatter
    }
  }
  c.sendCopy = c.send;

  if (spec.repeat) c.recvInit = c.recv;

  std::vector<const uint8_t*> blocks(n);
  c.expect.resize(n);
  std::shared_ptr<const Expect> shared;  // allreduce: one result for every rank
  for (size_t r = 0; r < n; ++r) {
    auto e = std::make_shared<Expect>();
    switch (spec.coll) {
      case Collective::kAllReduce:
        if (shared == nullptr) {
          for (size_t q = 0; q < n; ++q) blocks[q] = input[q].data();
          shared = std::make_shared<Expect>(reduceExpect(spec, blocks, 0));
        }
        c.expect[r] = shared;
        continue;
      case Collective::kReduceScatter:
        for (size_t q = 0; q < n; ++q) blocks[q] = input[q].data() + r * block;
        *e = reduceExpect(spec, blocks, spec.inPlace ? r * block : 0);
        break;
      case Collective::kReduce:
        if (static_cast<int>(r) == spec.root) {
          for (size_t q = 0; q < n; ++q) blocks[q] = input[q].data();
          *e = reduceExpect(spec, blocks, 0);
        } else {
          e->bytes = c.recv[r];  // not written on other ranks
        }
        break;
      case Collective::kAllGather:
        for (size_t q = 0; q < n; ++q)
          e->bytes.insert(e->bytes.end(), input[q].begin(), input[q].end());
        break;
      case Collective::kBroadcast: e->bytes = input[static_cast<size_t>(spec.root)]; break;
      case Collective::kAllToAll:
        for (size_t q = 0; q < n; ++q)
          e->bytes.insert(e->bytes.end(), input[q].begin() + static_cast<ptrdiff_t>(r * block),
                          input[q].begin() + static_cast<ptrdiff_t>((r + 1) * block));
        break;
    }
    c.expect[r] = std::move(e);
  }
  return c;
}

tsrResult_t createRankOps(tsrComm_t comm, RankOps* ops) {
  for (tsrDataType_t dt : allDatatypes()) {
    uint8_t scalar[8] = {};
    if (dtypeIsFloat(dt))
      storeFloat(dt, scalar, kFloatScalar);
    else
      storeBits(scalar, dtypeSize(dt), static_cast<uint64_t>(kIntScalar));
    tsrResult_t r = tsrRedOpCreatePreMulSum(&ops->preMul[static_cast<size_t>(dt)], scalar, dt,
                                            tsrScalarHostImmediate, comm);
    if (r != tsrSuccess) return r;
  }
  return tsrSuccess;
}

void destroyRankOps(tsrComm_t comm, const RankOps& ops) {
  for (tsrRedOp_t op : ops.preMul) tsrRedOpDestroy(op, comm);
}

std::string checkCase(const Case& c, int rank) {
  const auto r = static_cast<size_t>(rank);
  const Expect& e = *c.expect[r];
  const std::vector<uint8_t>& recv = c.recv[r];
  const size_t size = dtypeSize(c.spec.dtype);
  std::string out;
  auto note = [&](const std::string& s) {
    if (out.size() < 400) out += s;
  };
  if (!c.spec.inPlace && c.send[r] != c.sendCopy[r]) note(" sendbuff was modified;");
  if (e.values.empty()) {
    if (e.offset + e.bytes.size() > recv.size() ||
        (!e.bytes.empty() &&
         std::memcmp(recv.data() + e.offset, e.bytes.data(), e.bytes.size()) != 0)) {
      for (size_t i = 0; i < e.bytes.size(); ++i) {
        if (recv[e.offset + i] != e.bytes[i]) {
          char buf[96];
          std::snprintf(buf, sizeof buf, " byte %zu (element %zu): got 0x%02x want 0x%02x;", i,
                        i / size, recv[e.offset + i], e.bytes[i]);
          note(buf);
        }
      }
    }
    return out;
  }
  for (size_t i = 0; i < e.values.size(); ++i) {
    double got = loadFloat(c.spec.dtype, recv.data() + e.offset + i * size);
    double want = e.values[i];
    if (!(std::fabs(got - want) <= e.tolerances[i])) {
      char buf[128];
      std::snprintf(buf, sizeof buf, " element %zu: got %.9g want %.9g (tolerance %.3g);", i, got,
                    want, e.tolerances[i]);
      note(buf);
    }
  }
  return out;
}

std::vector<Case> matrixCases(Collective coll, const std::string& family, int nranks,
                              const std::vector<size_t>& counts) {
  std::vector<Case> cases;
  const std::vector<RedKind> noOp = {RedKind::kSum};
  const std::vector<RedKind> ops = collectiveReduces(coll) ? allOps() : noOp;
  uint64_t seed = 1000;
  for (tsrDataType_t dt : allDatatypes())
    for (RedKind op : ops)
      for (int inPlace = 0; inPlace < (coll == Collective::kAllToAll ? 1 : 2); ++inPlace)
        for (size_t count : counts) {
          Spec s;
          s.coll = coll;
          s.dtype = dt;
          s.op = op;
          s.algorithm = family;
          s.inPlace = inPlace != 0;
          s.count = count;
          s.root = static_cast<int>((count + static_cast<size_t>(dt) + static_cast<size_t>(op)) %
                                    static_cast<size_t>(nranks));
          s.seed = ++seed;
          s.repeat = collectiveReduces(coll) && dtypeIsFloat(dt);  // bitwise reproducible
          cases.push_back(makeCase(s, nranks));
        }
  return cases;
}

}  // namespace tessera::apitest
