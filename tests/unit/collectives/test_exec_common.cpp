#include "test_exec_common.hpp"

#include <sys/mman.h>

#include <cstring>
#include <thread>

#include "bootstrap/tcp_bootstrap.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/datatype.hpp"
#include "core/reduce_op.hpp"
#include "support/harness.hpp"
#include "transport/host_alloc.hpp"

namespace tessera::exectest {
namespace {

// The value rank `rank` contributes at element i: small integers in [-8, 8], and for products
// only -2, -1, 1, 2, so every result of up to 16 ranks is exact in float32 and int32.
double inputValue(int rank, size_t i, int salt, RedKind op) {
  auto h = static_cast<int64_t>(
      (static_cast<uint64_t>(rank) * 131 + i * 7 + static_cast<uint64_t>(salt) * 13) % 17);
  if (op == RedKind::kProd) {
    static const double kProd[] = {1, -1, 2, 1, -2, 1, 1};
    return kProd[h % 7];
  }
  return static_cast<double>(h - 8);
}

void store(tsrDataType_t dtype, void* p, size_t i, double v) {
  if (dtype == tsrInt32) {
    static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
  } else {
    static_cast<float*>(p)[i] = static_cast<float>(v);
  }
}

// Every rank's input, regenerated here (n * inputElems elements each).
std::vector<std::vector<uint8_t>> allInputs(int nranks, size_t elems, const CollCase& c) {
  size_t es = dtypeSize(c.dtype);
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    in[static_cast<size_t>(r)].resize(elems * es);
    for (size_t i = 0; i < elems; ++i)
      store(c.dtype, in[static_cast<size_t>(r)].data(), i, inputValue(r, i, c.salt, c.op));
  }
  return in;
}

RedOpDesc opOf(const CollCase& c) {
  RedOpDesc op;
  if (c.op == RedKind::kPreMulSum) {
    int32_t si = 3;
    float sf = 2;
    (void)makePreMulSum(c.dtype, c.dtype == tsrInt32 ? static_cast<const void*>(&si) : &sf, &op);
  } else {
    static const tsrRedOp_t kOps[] = {tsrSum, tsrProd, tsrMax, tsrMin, tsrAvg};
    (void)redOpBuiltin(kOps[static_cast<int>(c.op)], &op);
  }
  return op;
}

// Reduces segment `seg` (count elements) of every rank's input.
std::string reduceRef(const std::vector<std::vector<uint8_t>>& in, size_t seg, const CollCase& c,
                      std::vector<uint8_t>* out) {
  size_t es = dtypeSize(c.dtype);
  RedOpDesc op = opOf(c);
  std::vector<const void*> ptrs;
  for (const auto& v : in) ptrs.push_back(v.data() + seg * c.count * es);
  out->resize(c.count * es);
  if (reduceAllHost(op, c.dtype, ptrs.data(), static_cast<int>(ptrs.size()), out->data(),
                    c.count) != tsrSuccess)
    return std::string("reduceAllHost: ") + lastErrorMessage();
  return "";
}

// Buffers that are either plain vectors or shareable allocations.
struct Buf {
  std::vector<uint8_t> vec;
  void* shared = nullptr;
  size_t bytes = 0;
  uint8_t* data() { return shared ? static_cast<uint8_t*>(shared) : vec.data(); }
  ~Buf() {
    if (shared) (void)sharedHostFree(shared);
  }
  Result alloc(size_t n, bool useShared) {
    bytes = n;
    if (!useShared) {
      vec.assign(n + 64, 0xA5);
      return tsrSuccess;
    }
    TSR_CHECK(sharedHostAlloc(n + 64, &shared));
    std::memset(shared, 0xA5, n + 64);
    return tsrSuccess;
  }
};

std::string firstDiff(const uint8_t* got, const uint8_t* want, size_t bytes, size_t es,
                      tsrDataType_t dtype) {
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] == want[i]) continue;
    size_t e = i / es;
    double g, w;
    if (dtype == tsrInt32) {
      int32_t a, b;
      std::memcpy(&a, got + e * es, 4);
      std::memcpy(&b, want + e * es, 4);
      g = a;
      w = b;
    } else {
      float a, b;
      std::memcpy(&a, got + e * es, 4);
      std::memcpy(&b, want + e * es, 4);
      g = a;
      w = b;
    }
    return strprintf("element %zu is %g, expected %g", e, g, w);
  }
  return "";
}

}  // namespace

Result makeEngine(TransportContext& ctx, const EngineSetup& setup,
                  std::unique_ptr<CollectiveEngine>* out) {
  EngineOptions o;
  o.transports = &ctx;
  o.rank = ctx.rank();
  o.nranks = ctx.nranks();
  o.hostOf = setup.hostOf;
  o.timeoutSeconds = setup.timeoutSeconds;
  o.scratchBytes = setup.scratchBytes;
  return CollectiveEngine::create(o, out);
}

std::vector<std::string> runMixedRanks(
    int processes, int threadsPerProcess,
    const std::function<std::string(TransportContext& ctx)>& body, double runSeconds) {
  int nranks = processes * threadsPerProcess;
  std::vector<std::string> results(static_cast<size_t>(nranks));
  test::ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
  tsrUniqueId id{};
  {
    // No root thread in this process while it forks (forkRanks says why): rank 0 starts it.
    test::ScopedEnv commId("TESSERA_COMM_ID", test::loopbackCommId().c_str());
    if (createUserUniqueId(&id) != tsrSuccess) {
      results.assign(results.size(), std::string("createUserUniqueId: ") + lastErrorMessage());
      return results;
    }
  }
  // Each rank writes its sentence into a slot of a shared page; "ok" marks success.
  constexpr size_t kSlot = 4096;
  size_t bytes = kSlot * static_cast<size_t>(nranks);
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    results.assign(results.size(), "mmap for results failed");
    return results;
  }
  std::memset(shared, 0, bytes);
  auto slot = [&](int rank) {
    return static_cast<char*>(shared) + kSlot * static_cast<size_t>(rank);
  };
  std::vector<int> codes = test::forkRanks(
      processes,
      [&](int process) {
        std::vector<std::thread> threads;
        for (int t = 0; t < threadsPerProcess; ++t) {
          threads.emplace_back([&, t] {
            int rank = process * threadsPerProcess + t;
            std::string out;
            BootstrapOptions bo;
            bo.timeoutSeconds = 20;
            std::unique_ptr<Bootstrap> b;
            std::unique_ptr<TransportContext> ctx;
            TransportContextOptions o;
            if (TcpBootstrap::create(id, rank, nranks, bo, &b) != tsrSuccess) {
              out = std::string("TcpBootstrap::create: ") + lastErrorMessage();
            } else {
              o.bootstrap = b.get();
              o.timeoutSeconds = 20;
              if (TransportContext::create(o, &ctx) != tsrSuccess)
                out = std::string("TransportContext::create: ") + lastErrorMessage();
              else
                out = body(*ctx);
            }
            if (out.empty()) out = "ok";
            std::strncpy(slot(rank), out.c_str(), kSlot - 1);
          });
        }
        for (std::thread& th : threads) th.join();
        return 0;
      },
      runSeconds);
  for (int r = 0; r < nranks; ++r) {
    int code = codes[static_cast<size_t>(r / threadsPerProcess)];
    const char* text = slot(r);
    if (std::strcmp(text, "ok") == 0)
      results[static_cast<size_t>(r)] = "";
    else if (text[0] != 0)
      results[static_cast<size_t>(r)] = text;
    else
      results[static_cast<size_t>(r)] = strprintf("no result (process exit code %d)", code);
  }
  munmap(shared, bytes);
  return results;
}

Result runCall(CollectiveEngine& e, const CollCall& call, double timeoutSeconds) {
  std::unique_ptr<Operation> op;
  TSR_CHECK(e.start(call, &op));
  return runOperations({op.get()}, timeoutSeconds);
}

Result runP2P(CollectiveEngine& e, const std::vector<P2PCall>& calls, double timeoutSeconds) {
  std::unique_ptr<Operation> op;
  TSR_CHECK(e.startP2P(calls, &op));
  return runOperations({op.get()}, timeoutSeconds);
}

std::string caseName(const CollCase& c, int nranks) {
  return strprintf("%s %s n=%d count=%zu %s %s root=%d %s%s", collectiveName(c.coll),
                   c.algorithm.empty() ? "(tuner)" : c.algorithm.c_str(), nranks, c.count,
                   dtypeName(c.dtype), redKindName(c.op), c.root,
                   c.inPlace ? "in place" : "out of place", c.registerBuffers ? " registered" : "");
}

std::string runAndCheck(CollectiveEngine& e, int rank, int nranks, const CollCase& c,
                        std::string* described) {
  size_t es = dtypeSize(c.dtype);
  auto n = static_cast<size_t>(nranks);
  size_t inElems = c.count * static_cast<size_t>(inputSegments(c.coll, nranks));
  size_t outElems = c.count * static_cast<size_t>(outputSegments(c.coll, nranks));
  auto inputs = allInputs(nranks, inElems, c);
  const std::vector<uint8_t>& mine = inputs[static_cast<size_t>(rank)];

  // Buffers: out of place, a separate input; in place, the input inside the output (or for
  // reducescatter, the output inside the input), as NCCL defines it.
  Buf a, b;
  CollCall call;
  call.collective = c.coll;
  call.count = c.count;
  call.dtype = c.dtype;
  call.op = opOf(c);
  call.root = c.root;
  call.algorithm = c.algorithm;
  uint8_t* result = nullptr;  // where this rank's output lies
  if (!c.inPlace) {
    if (a.alloc(inElems * es, c.sharedAlloc) != tsrSuccess ||
        b.alloc(outElems * es, c.sharedAlloc) != tsrSuccess)
      return std::string("alloc: ") + lastErrorMessage();
    if (!mine.empty()) std::memcpy(a.data(), mine.data(), mine.size());
    call.sendbuf = a.data();
    call.recvbuf = b.data();
    result = b.data();
  } else if (c.coll == Collective::kReduceScatter) {
    if (a.alloc(inElems * es, c.sharedAlloc) != tsrSuccess) return "alloc failed";
    if (!mine.empty()) std::memcpy(a.data(), mine.data(), mine.size());
    call.sendbuf = a.data();
    call.recvbuf = a.data() + static_cast<size_t>(rank) * c.count * es;
    result = static_cast<uint8_t*>(call.recvbuf);
  } else {
    if (a.alloc(outElems * es, c.sharedAlloc) != tsrSuccess) return "alloc failed";
    size_t at = c.coll == Collective::kAllGather ? static_cast<size_t>(rank) * c.count * es : 0;
    if (!mine.empty()) std::memcpy(a.data() + at, mine.data(), mine.size());
    call.sendbuf = a.data() + at;
    call.recvbuf = a.data();
    result = a.data();
  }
  std::vector<void*> handles;
  if (c.registerBuffers) {
    for (Buf* buf : {&a, &b}) {
      if (buf->bytes == 0) continue;
      void* h = nullptr;
      if (e.registerBuffer(buf->data(), buf->bytes, &h) != tsrSuccess)
        return std::string("registerBuffer: ") + lastErrorMessage();
      handles.push_back(h);
    }
  }
  std::vector<uint8_t> before(result, result + outElems * es);

  std::unique_ptr<Operation> op;
  Result r = e.start(call, &op);
  if (r == tsrSuccess) r = runOperations({op.get()}, 30);
  for (void* h : handles) (void)e.deregisterBuffer(h);
  if (r != tsrSuccess)
    return caseName(c, nranks) + ": " + resultName(r) + ": " + lastErrorMessage();
  if (described != nullptr) *described = op->describe();

  // The reference for this rank's output.
  std::vector<uint8_t> want(outElems * es);
  std::vector<uint8_t> seg;
  std::string err;
  bool writes = true;
  switch (c.coll) {
    case Collective::kAllReduce: err = reduceRef(inputs, 0, c, &want); break;
    case Collective::kReduce:
      writes = rank == c.root;
      if (writes) err = reduceRef(inputs, 0, c, &want);
      break;
    case Collective::kReduceScatter:
      err = reduceRef(inputs, static_cast<size_t>(rank), c, &want);
      break;
    case Collective::kBroadcast: want = inputs[static_cast<size_t>(c.root)]; break;
    case Collective::kAllGather:
      for (size_t q = 0; q < n; ++q)
        if (c.count > 0)
          std::memcpy(want.data() + q * c.count * es, inputs[q].data(), c.count * es);
      break;
    case Collective::kAllToAll:
      for (size_t q = 0; q < n; ++q)
        if (c.count > 0)
          std::memcpy(want.data() + q * c.count * es,
                      inputs[q].data() + static_cast<size_t>(rank) * c.count * es, c.count * es);
      break;
  }
  if (!err.empty()) return err;
  if (!writes) want = before;  // a non-root's receive buffer is left alone
  std::string diff = firstDiff(result, want.data(), want.size(), es, c.dtype);
  if (!diff.empty()) return caseName(c, nranks) + strprintf(": rank %d output ", rank) + diff;
  if (!c.inPlace && !mine.empty() && std::memcmp(a.data(), mine.data(), mine.size()) != 0)
    return caseName(c, nranks) + strprintf(": rank %d input was modified", rank);
  return "";
}

std::vector<Usable> usablePlans(int nranks, const std::vector<int>& hostOf,
                                std::vector<std::string>* skipped) {
  std::vector<Usable> out;
  for (const AlgorithmInfo& info : algorithms()) {
    for (Collective c : info.collectives) {
      std::vector<int> roots{0};
      if (collectiveHasRoot(c) && nranks > 1) roots.push_back(nranks - 1);
      for (int root : roots) {
        GenParams g;
        g.collective = c;
        g.algorithm = info.name;
        g.nranks = nranks;
        g.root = root;
        g.hostOf = hostOf;
        Plan p;
        VerifyReport report;
        std::string why;
        if (generatePlan(g, &p) != tsrSuccess)
          why = std::string("generate: ") + lastErrorMessage();
        else if (verifyPlan(p, &report) != tsrSuccess)
          why = "verify: " + report.message;
        if (!why.empty()) {
          skipped->push_back(strprintf("%s %s n=%d root=%d: %s", info.name, collectiveName(c),
                                       nranks, root, why.c_str()));
          continue;
        }
        out.push_back({info.name, c, root});
      }
    }
  }
  return out;
}

}  // namespace tessera::exectest
