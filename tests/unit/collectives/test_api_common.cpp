// The driver of the API tests: communicators, calls through the C API, the matrix runner
// (test_api_common.hpp).
#include "unit/collectives/test_api_common.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/handles.hpp"
#include "core/datatype.hpp"
#include "support/harness.hpp"

namespace tessera::apitest {
namespace {

tsrRedOp_t builtinOp(RedKind k) {
  switch (k) {
    case RedKind::kSum: return tsrSum;
    case RedKind::kProd: return tsrProd;
    case RedKind::kMax: return tsrMax;
    case RedKind::kMin: return tsrMin;
    case RedKind::kAvg: return tsrAvg;
    case RedKind::kPreMulSum: break;
  }
  return tsrSum;
}

}  // namespace

tsrResult_t runCase(tsrComm_t comm, int rank, Case& c, const RankOps& ops) {
  const Spec& s = c.spec;
  const auto r = static_cast<size_t>(rank);
  const size_t block = s.count * dtypeSize(s.dtype);
  uint8_t* recv = c.recv[r].data();
  const uint8_t* send = s.inPlace ? recv : c.send[r].data();
  const tsrRedOp_t op =
      s.op == RedKind::kPreMulSum ? ops.preMul[static_cast<size_t>(s.dtype)] : builtinOp(s.op);
  const bool root = rank == s.root;
  switch (s.coll) {
    case Collective::kAllReduce:
      return tsrAllReduce(send, recv, s.count, s.dtype, op, comm, nullptr);
    case Collective::kReduceScatter:
      return tsrReduceScatter(send, s.inPlace ? recv + r * block : recv, s.count, s.dtype, op, comm,
                              nullptr);
    case Collective::kAllGather:
      return tsrAllGather(s.inPlace ? recv + r * block : send, recv, s.count, s.dtype, comm,
                          nullptr);
    case Collective::kBroadcast:
      // Non-roots may pass NULL as sendbuff; odd ranks do.
      if (!s.inPlace && !root && rank % 2 == 1) send = nullptr;
      return tsrBroadcast(send, recv, s.count, s.dtype, s.root, comm, nullptr);
    case Collective::kReduce:
      // Non-roots may pass NULL as recvbuff; odd ranks do (out of place).
      return tsrReduce(send, !s.inPlace && !root && rank % 2 == 1 ? nullptr : recv, s.count,
                       s.dtype, op, s.root, comm, nullptr);
    case Collective::kAllToAll: return tsrAlltoAll(send, recv, s.count, s.dtype, comm, nullptr);
  }
  return tsrInternalError;
}

void setAlgorithm(tsrComm_t comm, const std::string& algorithm) {
  std::shared_ptr<Communicator> c;
  if (handleLookup(comm, "setAlgorithm", &c) == tsrSuccess)
    tessera::commImpl(*c)->setCallOverride(algorithm, nullptr);
}

ThreadComms::ThreadComms(int n) : comms_(static_cast<size_t>(n), nullptr) {
  std::vector<int> devs(static_cast<size_t>(n), TSR_DEVICE_HOST);
  ok_ = tsrCommInitAll(comms_.data(), n, devs.data()) == tsrSuccess;
  if (!ok_) {
    error_ = tsrGetLastError(nullptr);
    comms_.assign(static_cast<size_t>(n), nullptr);
  }
}

ThreadComms::~ThreadComms() {
  for (tsrComm_t c : comms_)
    if (c != nullptr) tsrCommDestroy(c);
}

std::vector<std::string> runMatrix(const ThreadComms& comms, std::vector<Case>& cases,
                                   double deadlineSeconds) {
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (failures.size() < 30) failures.push_back(s);
  };
  const int n = comms.size();
  // A failed call leaves the ranks out of step: the first failure aborts every rank, so the
  // others return at once instead of at their deadline (their errors then only say that).
  std::atomic<bool> stopped{false};
  auto stopAll = [&](const std::string& why) {
    if (stopped.exchange(true)) return;
    fail(why);
    for (int q = 0; q < n; ++q) tsrCommAbort(comms[q]);
  };
  auto what = [&](int rank, const Case& c, const char* again, tsrResult_t r) {
    return "rank " + std::to_string(rank) + ": " + describe(c.spec, n) + again + ": " +
           tsrGetErrorString(r) + ": " + tsrGetLastError(nullptr);
  };
  test::runRanks(
      n,
      [&](int rank) {
        const auto ur = static_cast<size_t>(rank);
        tsrComm_t comm = comms[rank];
        RankOps ops;
        if (createRankOps(comm, &ops) != tsrSuccess)
          return stopAll("rank " + std::to_string(rank) +
                         ": premulsum ops: " + tsrGetLastError(nullptr));
        for (Case& c : cases) {
          setAlgorithm(comm, c.spec.algorithm);
          tsrResult_t r = runCase(comm, rank, c, ops);
          if (r != tsrSuccess) return stopAll(what(rank, c, "", r));
          std::string bad = checkCase(c, rank);
          if (bad.empty() && c.spec.repeat) {
            std::vector<uint8_t> first = c.recv[ur];
            c.recv[ur] = c.recvInit[ur];
            r = runCase(comm, rank, c, ops);
            if (r != tsrSuccess) return stopAll(what(rank, c, " (again)", r));
            if (c.recv[ur] != first) bad = " the same call twice gave different bytes;";
          }
          if (!bad.empty()) fail("rank " + std::to_string(rank) + ": " + describe(c.spec, n) + bad);
        }
        setAlgorithm(comm, "");
        destroyRankOps(comm, ops);
      },
      deadlineSeconds);
  return failures;
}

uint64_t testSeed(uint64_t fallback) {
  uint64_t seed = fallback;
  if (const char* s = std::getenv("TESSERA_TEST_SEED")) seed = std::strtoull(s, nullptr, 0);
  std::printf("TESSERA_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

std::vector<std::string> runFamilies(Collective coll, int nranks,
                                     const std::vector<size_t>& counts) {
  std::vector<std::string> failures;
  const std::vector<std::string> families = familiesFor(coll);
  if (families.empty())
    failures.push_back(std::string("no family generates ") + collectiveName(coll));
  for (const std::string& family : families) {
    std::printf("  %s n=%d: family %s\n", collectiveName(coll), nranks, family.c_str());
    ThreadComms comms(nranks);
    if (!comms.ok()) {
      failures.push_back("tsrCommInitAll: " + comms.error());
      continue;
    }
    std::vector<Case> cases = matrixCases(coll, family, nranks, counts);
    for (std::string& f : runMatrix(comms, cases, 240)) failures.push_back(std::move(f));
  }
  return failures;
}

void setTestEnvironment() {
  // A rank that stops early makes its peers fail within seconds, not the default 300.
  setenv("TESSERA_TRANSPORT_TIMEOUT", "20", 0);
  setenv("TESSERA_BOOTSTRAP_TIMEOUT", "20", 0);
  // Small scratch: calls above 64 KiB are pipelined through it in slices.
  setenv("TESSERA_SCRATCH_BYTES", "65536", 0);
}

}  // namespace tessera::apitest
