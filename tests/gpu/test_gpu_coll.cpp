// The device executor against the host executor (gpu label): every collective x datatype x op on
// 1, 2, 4 and 8 thread ranks sharing GPU 0, in persistent and launch mode. Each case runs the same
// call twice through the public API with the same inputs: on host buffers (the host executor, the
// reference) and on device buffers (the device executor, on the rank's stream); the outputs must
// be the same bytes. Inputs are small integers whose every reduction order is exact
// (fillPattern), so the comparison holds whatever algorithm or protocol each executor picked.
// The ranks' communicators and buffers are made once per (rank count, mode) and reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "support/harness.hpp"
#include "tessera/tessera.h"
#include "test_gpu_coll_ranks.hpp"

namespace tessera::gputest {
namespace {

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };
const char* collText(Coll c) {
  static const char* const kNames[] = {"allreduce", "reducescatter", "allgather",
                                       "broadcast", "reduce",        "alltoall"};
  return kNames[static_cast<int>(c)];
}
bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}

struct Case {
  Coll coll;
  tsrDataType_t dtype;
  tsrRedOp_t op;
  size_t count;  // the API's count
  int root;
  bool inPlace;  // allreduce only (send == recv)
  std::string name() const {
    return std::string(collText(coll)) + " " + typeText(dtype) + (reduces(coll) ? " " : "") +
           (reduces(coll) ? opText(op) : "") + " count " + std::to_string(count) + " root " +
           std::to_string(root) + (inPlace ? " in place" : "");
  }
};

// Elements of the send and receive buffers of rank `me` of n.
void elements(const Case& c, int n, size_t* send, size_t* recv) {
  const size_t all = c.count * static_cast<size_t>(n);
  *send = c.count;
  *recv = c.count;
  if (c.coll == Coll::kReduceScatter) *send = all;
  if (c.coll == Coll::kAllGather) *recv = all;
  if (c.coll == Coll::kAllToAll) *send = *recv = all;
}

tsrResult_t issue(const Case& c, const void* send, void* recv, tsrComm_t comm, void* stream) {
  auto s = static_cast<tsrStream_t>(stream);
  if (c.inPlace) send = recv;
  switch (c.coll) {
    case Coll::kAllReduce: return tsrAllReduce(send, recv, c.count, c.dtype, c.op, comm, s);
    case Coll::kReduceScatter: return tsrReduceScatter(send, recv, c.count, c.dtype, c.op, comm, s);
    case Coll::kAllGather: return tsrAllGather(send, recv, c.count, c.dtype, comm, s);
    case Coll::kBroadcast: return tsrBroadcast(send, recv, c.count, c.dtype, c.root, comm, s);
    case Coll::kReduce: return tsrReduce(send, recv, c.count, c.dtype, c.op, c.root, comm, s);
    case Coll::kAllToAll: return tsrAlltoAll(send, recv, c.count, c.dtype, comm, s);
  }
  return tsrInternalError;
}

// Every collective x datatype x op (reducing ones) at two counts: one element (the smallest call,
// LL-sized) and an odd count that no vector width divides. Roots and in-place vary by case.
std::vector<Case> allCases(int n) {
  std::vector<Case> cases;
  int k = 0;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast,
                    Coll::kReduce, Coll::kAllToAll})
    for (int t = 0; t < tsrNumTypes; ++t)
      for (int op = 0; op < (reduces(coll) ? static_cast<int>(tsrNumOps) : 1); ++op)
        for (size_t count : {size_t{1}, size_t{1031}}) {
          Case c{coll,  static_cast<tsrDataType_t>(t),         static_cast<tsrRedOp_t>(op), count,
                 k % n, coll == Coll::kAllReduce && k % 3 == 1};
          cases.push_back(c);
          ++k;
        }
  return cases;
}

constexpr size_t kLargestCount = 1031;
constexpr unsigned char kSentinel = 0xa5;

// What rank `me` does for one case; returns "" or the first difference / error.
std::string runCase(GpuRanks& g, int me, const Case& c, uint32_t seed) {
  const int n = g.size();
  size_t sendElts = 0, recvElts = 0;
  elements(c, n, &sendElts, &recvElts);
  const size_t e = eltBytes(c.dtype);
  const size_t sendBytes = sendElts * e, recvBytes = recvElts * e;
  std::vector<unsigned char> send(sendBytes), hostOut(recvBytes, kSentinel),
      deviceOut(recvBytes, 0);
  fillPattern(send.data(), sendElts, c.dtype, me, seed);
  if (c.inPlace) std::memcpy(hostOut.data(), send.data(), sendBytes);

  // The reference: host buffers, host executor (the stream is ignored there).
  tsrResult_t r = issue(c, send.data(), hostOut.data(), g.comm(me), g.stream(me));
  if (r != tsrSuccess)
    return "host call: " + std::string(tsrGetErrorString(r)) + ": " + tsrGetLastError(g.comm(me));

  void* dsend = g.buffer(me, 0);
  void* drecv = g.buffer(me, 1);
  std::string why = setDevice(drecv, kSentinel, recvBytes, g.stream(me));
  if (why.empty()) why = toDevice(c.inPlace ? drecv : dsend, send.data(), sendBytes, g.stream(me));
  if (!why.empty()) return why;
  r = issue(c, dsend, drecv, g.comm(me), g.stream(me));
  if (r != tsrSuccess)
    return "device call: " + std::string(tsrGetErrorString(r)) + ": " + tsrGetLastError(g.comm(me));
  why = waitStream(g.stream(me), 30);
  if (!why.empty()) return "device call: " + why;
  tsrResult_t async = tsrSuccess;
  tsrCommGetAsyncError(g.comm(me), &async);
  if (async != tsrSuccess)
    return "device call: async error " + std::string(tsrGetErrorString(async)) + ": " +
           tsrGetLastError(g.comm(me));
  why = toHost(deviceOut.data(), drecv, recvBytes, g.stream(me));
  if (!why.empty()) return why;
  for (size_t i = 0; i < recvBytes; ++i)
    if (deviceOut[i] != hostOut[i])
      return "byte " + std::to_string(i) + " (element " + std::to_string(i / e) + "): device " +
             std::to_string(deviceOut[i]) + ", host " + std::to_string(hostOut[i]);
  return "";
}

struct Param {
  int nranks;
  bool launchMode;  // TESSERA_LAUNCH=kernel
};

class GpuCollMatrix : public ::testing::TestWithParam<Param> {};

TEST_P(GpuCollMatrix, DeviceMatchesHostExecutor) {
  TSR_SKIP_WITHOUT_GPU();
  const Param p = GetParam();
  // Read when the communicators' engines are made: before the first call.
  test::ScopedEnv launch("TESSERA_LAUNCH", p.launchMode ? "kernel" : nullptr);
  GpuRanks g;
  const size_t bytes = kLargestCount * static_cast<size_t>(p.nranks) * 8;
  ASSERT_EQ(g.init(p.nranks, bytes), "");
  const std::vector<Case> cases = allCases(p.nranks);
  std::mutex mu;
  std::vector<std::string> failures;
  test::runRanks(
      p.nranks,
      [&](int me) {
        std::string bound = useGpu0();
        if (!bound.empty()) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("rank " + std::to_string(me) + ": " + bound);
          return;
        }
        for (size_t i = 0; i < cases.size(); ++i) {
          std::string why = runCase(g, me, cases[i], static_cast<uint32_t>(i));
          if (why.empty()) continue;
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("rank " + std::to_string(me) + ", " + cases[i].name() + ": " + why);
          // A call error leaves the peers waiting for this rank: stop (they time out and say so).
          if (why.rfind("byte ", 0) != 0) return;
        }
      },
      600);
  std::sort(failures.begin(), failures.end());
  for (size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " failure(s) over " << cases.size()
                                << " cases on " << p.nranks << " ranks";
}

INSTANTIATE_TEST_SUITE_P(, GpuCollMatrix,
                         ::testing::Values(Param{1, false}, Param{2, false}, Param{4, false},
                                           Param{8, false}, Param{1, true}, Param{2, true},
                                           Param{4, true}, Param{8, true}),
                         [](const ::testing::TestParamInfo<Param>& param) {
                           return std::to_string(param.param.nranks) + "Ranks" +
                                  (param.param.launchMode ? "Launch" : "Persistent");
                         });

}  // namespace
}  // namespace tessera::gputest
