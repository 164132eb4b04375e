#include "test_device_emulation_common.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/datatype.hpp"
#include "core/reduce_op.hpp"

namespace tessera::devtest {
namespace {

// Values in {-2..2} ({-1, 1, 2} for products): every partial sum of up to 4 ranks (|s| <= 8, or
// even and <= 16 after premulsum by 2) and every product (a power of two) is exact in every type
// tested, float8e5m2 included, whatever order an algorithm combines them in.
double inputValue(int rank, size_t i, int salt, RedKind op) {
  uint64_t h = (static_cast<uint64_t>(rank) * 131 + i * 7 + static_cast<uint64_t>(salt) * 13) % 17;
  if (op == RedKind::kProd) {
    static const double kProd[] = {1, -1, 2, 1, -2, 1, 1};
    return kProd[h % 7];
  }
  return static_cast<double>(h % 5) - 2;
}

void putVal(tsrDataType_t dt, void* p, size_t i, double v) {
  dtypeVisit(dt, [&](auto tag) {
    using T = decltype(tag);
    using C = typename ElemTraits<T>::Compute;
    static_cast<T*>(p)[i] = ElemTraits<T>::store(static_cast<C>(v));
  });
}

double getVal(tsrDataType_t dt, const void* p, size_t i) {
  return dtypeVisit(dt, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(ElemTraits<T>::load(static_cast<const T*>(p)[i]));
  });
}

RedOpDesc opOf(const DevCase& c) {
  RedOpDesc op;
  if (c.op == RedKind::kPreMulSum) {
    alignas(8) unsigned char scalar[8] = {};
    putVal(c.dtype, scalar, 0, 2.0);
    (void)makePreMulSum(c.dtype, scalar, &op);
  } else {
    static const tsrRedOp_t kOps[] = {tsrSum, tsrProd, tsrMax, tsrMin, tsrAvg};
    (void)redOpBuiltin(kOps[static_cast<int>(c.op)], &op);
  }
  return op;
}

double reduceRef(const DevCase& c, int nranks, size_t seg, size_t i) {
  size_t at = seg * c.count + i;
  double acc = 0;
  for (int r = 0; r < nranks; ++r) {
    double v = inputValue(r, at, c.salt, c.op);
    if (c.op == RedKind::kPreMulSum) v *= 2;
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (c.op) {
      case RedKind::kProd: acc *= v; break;
      case RedKind::kMax: acc = std::max(acc, v); break;
      case RedKind::kMin: acc = std::min(acc, v); break;
      default: acc += v;
    }
  }
  if (c.op == RedKind::kAvg) {
    acc /= nranks;
    if (c.dtype == tsrInt32) acc = std::trunc(acc);
  }
  return acc;
}

// The reference output element `i` of rank `rank` (NaN: the buffer is left alone).
double refOut(const DevCase& c, int rank, int nranks, size_t i) {
  size_t seg = i / c.count, at = i % c.count;
  switch (c.coll) {
    case Collective::kAllReduce: return reduceRef(c, nranks, 0, i);
    case Collective::kReduce: return rank == c.root ? reduceRef(c, nranks, 0, i) : NAN;
    case Collective::kReduceScatter: return reduceRef(c, nranks, static_cast<size_t>(rank), i);
    case Collective::kBroadcast: return inputValue(c.root, i, c.salt, c.op);
    case Collective::kAllGather: return inputValue(static_cast<int>(seg), at, c.salt, c.op);
    case Collective::kAllToAll:
      return inputValue(static_cast<int>(seg), static_cast<size_t>(rank) * c.count + at, c.salt,
                        c.op);
  }
  return NAN;
}

double tolerance(tsrDataType_t dt, RedKind op, double ref) {
  if (dt == tsrInt32) return op == RedKind::kAvg ? 1 : 0;  // integer avg: either rounding
  double rel = dt == tsrFloat8e5m2 ? 0.25 : dt == tsrBfloat16 ? 1.0 / 128 : 1e-6;
  return rel * std::fabs(ref);
}

// Runs the call one way into fresh buffers, or (`window`) into [window, window + windowBytes):
// the input at its start and the output after it (64-byte aligned), or both at its start in
// place. `out` receives this rank's output buffer.
std::string runOnce(CollectiveEngine& e, int rank, int nranks, const DevCase& c, bool device,
                    std::vector<uint8_t>* out, char* window = nullptr, size_t windowBytes = 0) {
  size_t es = dtypeSize(c.dtype);
  size_t inElems = c.count * static_cast<size_t>(inputSegments(c.coll, nranks));
  size_t outElems = c.count * static_cast<size_t>(outputSegments(c.coll, nranks));
  std::vector<uint8_t> a(inElems * es), b(outElems * es, 0xA5);
  for (size_t i = 0; i < inElems; ++i)
    putVal(c.dtype, a.data(), i, inputValue(rank, i, c.salt, c.op));
  CollCall call;
  call.collective = c.coll;
  call.count = c.count;
  call.dtype = c.dtype;
  call.op = opOf(c);
  call.root = c.root;
  call.algorithm = c.algorithm;
  std::vector<uint8_t> inPlaceBuf;
  uint8_t* send = a.data();
  uint8_t* recv = b.data();
  if (c.inPlace) {  // allreduce / broadcast / reduce only: the input is the output
    inPlaceBuf = a;
    inPlaceBuf.resize(std::max(a.size(), b.size()), 0xA5);
    send = recv = inPlaceBuf.data();
  }
  if (window != nullptr) {
    const size_t outAt = c.inPlace ? 0 : (a.size() + 63) / 64 * 64;
    const size_t need = outAt + (c.inPlace ? inPlaceBuf.size() : b.size());
    if (need > windowBytes)
      return devCaseName(c, nranks) +
             strprintf(": needs %zu bytes of window, has %zu", need, windowBytes);
    send = reinterpret_cast<uint8_t*>(window);
    recv = reinterpret_cast<uint8_t*>(window) + outAt;
    if (c.inPlace) {
      std::memcpy(send, inPlaceBuf.data(), inPlaceBuf.size());
    } else {
      std::memcpy(send, a.data(), a.size());
      std::memcpy(recv, b.data(), b.size());
    }
  }
  call.sendbuf = send;
  call.recvbuf = recv;
  const std::vector<uint8_t> input = a;
  Result r;
  if (device) {
    r = e.enqueue(call, nullptr);
    if (r == tsrSuccess) r = e.deviceSynchronize();
  } else {
    std::unique_ptr<Operation> op;
    r = e.start(call, &op);
    if (r == tsrSuccess) r = runOperations({op.get()}, 30);
  }
  if (r != tsrSuccess)
    return devCaseName(c, nranks) + (device ? " (device): " : " (host): ") + resultName(r) + ": " +
           lastErrorMessage();
  if (c.inPlace) {
    out->assign(recv, recv + b.size());
  } else {
    if (std::memcmp(send, input.data(), input.size()) != 0)
      return devCaseName(c, nranks) + ": the input was modified";
    out->assign(recv, recv + b.size());
  }
  return "";
}

std::string compareRuns(const DevCase& c, int rank, int nranks, const std::vector<uint8_t>& dev,
                        const std::vector<uint8_t>& host) {
  size_t es = dtypeSize(c.dtype);
  for (size_t i = 0; i < dev.size() / es; ++i) {
    double g = getVal(c.dtype, dev.data(), i), h = getVal(c.dtype, host.data(), i);
    if (std::memcmp(dev.data() + i * es, host.data() + i * es, es) != 0)
      return devCaseName(c, nranks) +
             strprintf(": rank %d element %zu is %g on the device executor, %g on the host", rank,
                       i, g, h);
    double want = refOut(c, rank, nranks, i);
    if (std::isnan(want)) {
      for (size_t k = 0; k < es; ++k)
        if (dev[i * es + k] != 0xA5 && !c.inPlace)
          return devCaseName(c, nranks) + strprintf(": rank %d wrote element %zu", rank, i);
      continue;
    }
    if (std::fabs(g - want) > tolerance(c.dtype, c.op, want))
      return devCaseName(c, nranks) +
             strprintf(": rank %d element %zu is %g, expected %g", rank, i, g, want);
  }
  return "";
}

}  // namespace

Result makeDeviceEngine(TransportContext& ctx, const DevSetup& setup,
                        std::unique_ptr<CollectiveEngine>* out) {
  EngineOptions o;
  o.transports = &ctx;
  o.rank = ctx.rank();
  o.nranks = ctx.nranks();
  o.timeoutSeconds = setup.timeoutSeconds;
  o.scratchBytes = setup.scratchBytes;
  o.deviceEmulation = true;
  o.minCtas = o.maxCtas = setup.ctas;
  return CollectiveEngine::create(o, out);
}

std::string devCaseName(const DevCase& c, int nranks) {
  return strprintf("%s %s n=%d count=%zu %s %s root=%d%s", collectiveName(c.coll),
                   c.algorithm.empty() ? "(tuner)" : c.algorithm.c_str(), nranks, c.count,
                   dtypeName(c.dtype), redKindName(c.op), c.root, c.inPlace ? " in place" : "");
}

std::string runDeviceCase(CollectiveEngine& e, int rank, int nranks, const DevCase& c) {
  std::vector<uint8_t> dev, host;
  std::string err = runOnce(e, rank, nranks, c, true, &dev);
  if (err.empty()) err = runOnce(e, rank, nranks, c, false, &host);
  if (!err.empty()) return err;
  return compareRuns(c, rank, nranks, dev, host);
}

std::string runDeviceCaseIn(CollectiveEngine& e, int rank, int nranks, const DevCase& c,
                            char* window, size_t windowBytes) {
  std::vector<uint8_t> dev, host;
  std::string err = runOnce(e, rank, nranks, c, true, &dev, window, windowBytes);
  if (err.empty()) err = runOnce(e, rank, nranks, c, false, &host);
  if (!err.empty()) return err;
  return compareRuns(c, rank, nranks, dev, host);
}

}  // namespace tessera::devtest
