// tsrSend / tsrRecv on device buffers (gpu label), thread ranks sharing GPU 0: pairs over every
// size class and element width, a ring driven by one thread in one group, uneven all-to-all in any
// order, sends to self, groups in a row mixed with device all-reduces on the same stream, graph
// capture and replay, a size mismatch and a missing peer (the stream completes, the communicator's
// async error says why), and tsrCommAbort of a stuck receive. Every byte received is compared with
// a pattern computed on the host from (sender, receiver, message, byte, round).
//
// Written on a machine without a GPU: these tests have not run yet (they skip there); the same
// protocol is tested on host threads by tests/unit/collectives/test_device_p2p*.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/build_config.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"
#include "test_gpu_coll_ranks.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::gputest {
namespace {

#if TESSERA_HAVE_CUDA

constexpr size_t kBufBytes = 8 << 20;  // per rank and buffer: 0 sends, 1 receives

uint8_t patternByte(int from, int to, size_t k, size_t i, uint32_t round) {
  uint64_t z = (static_cast<uint64_t>(from) << 48) ^ (static_cast<uint64_t>(to) << 36) ^
               (static_cast<uint64_t>(k) << 28) ^ (static_cast<uint64_t>(round) << 20) ^ i;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint8_t>(z ^ (z >> 31));
}

struct Msg {
  size_t count;
  tsrDataType_t dtype;
  size_t bytes() const { return count * eltBytes(dtype); }
};
// What `from` sends `to`, in order (every rank computes the same).
using Spec = std::vector<Msg> (*)(int from, int to, int n);

// One rank's layout: its messages, each at a 256-byte aligned offset of the send or receive area.
struct Plan {
  struct Item {
    int peer;
    size_t k;
    Msg m;
    size_t off;
  };
  std::vector<Item> sends, recvs;
  size_t sendBytes = 0, recvBytes = 0;
  Plan(Spec spec, int me, int n) {
    for (int p = 0; p < n; ++p) {
      std::vector<Msg> out = spec(me, p, n), in = spec(p, me, n);
      for (size_t k = 0; k < out.size(); ++k) {
        sends.push_back(Item{p, k, out[k], sendBytes});
        sendBytes += (out[k].bytes() + 255) / 256 * 256;
      }
      for (size_t k = 0; k < in.size(); ++k) {
        recvs.push_back(Item{p, k, in[k], recvBytes});
        recvBytes += (in[k].bytes() + 255) / 256 * 256;
      }
    }
  }
};

// Fills rank `me`'s send area; the receive area is set to 0xA5 (so untouched gaps are checkable).
std::string prepare(GpuRanks& g, const Plan& plan, int me, uint32_t round) {
  std::vector<uint8_t> host(plan.sendBytes, 0);
  for (const Plan::Item& s : plan.sends)
    for (size_t i = 0; i < s.m.bytes(); ++i)
      host[s.off + i] = patternByte(me, s.peer, s.k, i, round);
  std::string why = toDevice(g.buffer(me, 0), host.data(), host.size(), g.stream(me));
  if (why.empty()) why = setDevice(g.buffer(me, 1), 0xA5, plan.recvBytes + 256, g.stream(me));
  return why;
}

// The group's calls of rank `me`, sends and receives interleaved in a rank-dependent order.
tsrResult_t issueCalls(GpuRanks& g, const Plan& plan, int me) {
  auto* send = static_cast<char*>(g.buffer(me, 0));
  auto* recv = static_cast<char*>(g.buffer(me, 1));
  auto s = static_cast<tsrStream_t>(g.stream(me));
  const size_t total = plan.sends.size() + plan.recvs.size();
  size_t si = 0, ri = 0;
  for (size_t i = 0; i < total; ++i) {
    const bool doSend = ri == plan.recvs.size() || (si < plan.sends.size() && (i + me) % 3 != 0);
    tsrResult_t r;
    if (doSend) {
      const Plan::Item& it = plan.sends[si++];
      r = tsrSend(send + it.off, it.m.count, it.m.dtype, it.peer, g.comm(me), s);
    } else {
      const Plan::Item& it = plan.recvs[ri++];
      r = tsrRecv(recv + it.off, it.m.count, it.m.dtype, it.peer, g.comm(me), s);
    }
    if (r != tsrSuccess) return r;
  }
  return tsrSuccess;
}

// Waits for the stream and compares rank `me`'s receive area with the pattern.
std::string verify(GpuRanks& g, const Plan& plan, int me, uint32_t round) {
  std::vector<uint8_t> host(plan.recvBytes + 256);
  std::string why = waitStream(g.stream(me), 60);
  if (why.empty()) why = toHost(host.data(), g.buffer(me, 1), host.size(), g.stream(me));
  if (!why.empty()) return why;
  tsrResult_t async = tsrSuccess;
  tsrCommGetAsyncError(g.comm(me), &async);
  if (async != tsrSuccess) return std::string("async error: ") + tsrGetLastError(g.comm(me));
  for (const Plan::Item& r : plan.recvs) {
    for (size_t i = 0; i < r.m.bytes(); ++i)
      if (host[r.off + i] != patternByte(r.peer, me, r.k, i, round))
        return "message " + std::to_string(r.k) + " from rank " + std::to_string(r.peer) +
               " differs at byte " + std::to_string(i);
    if (r.m.bytes() % 256 != 0 && host[r.off + r.m.bytes()] != 0xA5)
      return "message " + std::to_string(r.k) + " from rank " + std::to_string(r.peer) +
             " wrote past its end";
  }
  return "";
}

// Every rank on its own thread runs `rounds` groups of `spec`.
void exchangeOnThreads(int n, Spec spec, int rounds) {
  GpuRanks g;
  ASSERT_EQ(g.init(n, kBufBytes), "");
  std::mutex mu;
  std::vector<std::string> failures;
  test::runRanks(
      n,
      [&](int me) {
        auto fail = [&](const std::string& why) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("rank " + std::to_string(me) + ": " + why);
        };
        if (std::string why = useGpu0(); !why.empty()) return fail(why);
        Plan plan(spec, me, n);
        if (plan.sendBytes > kBufBytes || plan.recvBytes + 256 > kBufBytes) return fail("too big");
        for (uint32_t round = 1; round <= static_cast<uint32_t>(rounds); ++round) {
          if (std::string why = prepare(g, plan, me, round); !why.empty()) return fail(why);
          if (tsrGroupStart() != tsrSuccess || issueCalls(g, plan, me) != tsrSuccess ||
              tsrGroupEnd() != tsrSuccess)
            return fail(tsrGetLastError(g.comm(me)));
          if (std::string why = verify(g, plan, me, round); !why.empty())
            return fail("round " + std::to_string(round) + ": " + why);
        }
      },
      300);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

const tsrDataType_t kWidths[] = {tsrInt8, tsrBfloat16, tsrFloat32, tsrUint64};

std::vector<Msg> pairSpec(int from, int to, int) {
  std::vector<Msg> out;
  if (from == to) return out;
  for (tsrDataType_t t : kWidths)
    for (size_t c : {size_t{1}, size_t{1237}, size_t{65536 / eltBytes(t)}, size_t{300001}})
      out.push_back(Msg{c, t});
  return out;
}

std::vector<Msg> unevenSpec(int from, int to, int) {
  const size_t base = (static_cast<size_t>(from) * 7 + static_cast<size_t>(to) * 3) % 5;
  std::vector<Msg> out{Msg{base * 39997 + 1, tsrFloat64},
                       Msg{(base + 1) * 1001 + static_cast<size_t>(to), tsrInt8}};
  return out;
}

TEST(GpuSendRecv, PairsEverySizeAndWidth) {
  TSR_SKIP_WITHOUT_GPU();
  exchangeOnThreads(2, pairSpec, 2);
}

TEST(GpuSendRecv, AllToAllUnevenWithSelf) {
  TSR_SKIP_WITHOUT_GPU();
  exchangeOnThreads(4, unevenSpec, 3);
}

// One thread drives every rank's calls in one group (each rank sends to r + 1 and receives from
// r - 1), as a single-process multi-GPU framework does.
TEST(GpuSendRecv, RingFromOneThread) {
  TSR_SKIP_WITHOUT_GPU();
  const int n = 4;
  GpuRanks g;
  ASSERT_EQ(g.init(n, kBufBytes), "");
  auto ring = [](int from, int to, int nr) {
    std::vector<Msg> out;
    if (to == (from + 1) % nr) out.push_back(Msg{100003, tsrFloat32});
    return out;
  };
  std::vector<Plan> plans;
  for (int r = 0; r < n; ++r) plans.emplace_back(ring, r, n);
  for (uint32_t round = 1; round <= 3; ++round) {
    for (int r = 0; r < n; ++r) ASSERT_EQ(prepare(g, plans[size_t(r)], r, round), "");
    ASSERT_EQ(tsrGroupStart(), tsrSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(issueCalls(g, plans[size_t(r)], r), tsrSuccess) << tsrGetLastError(g.comm(r));
    ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(verify(g, plans[size_t(r)], r, round), "") << "rank " << r;
  }
}

// A send/recv group between two all-reduces on the same stream, captured into a graph after one
// eager run, replayed with new inputs: the replays give what the eager calls gave.
TEST(GpuSendRecv, MixedWithAllReduceAndGraphReplay) {
  TSR_SKIP_WITHOUT_GPU();
  const int n = 2;
  GpuRanks g;
  ASSERT_EQ(g.init(n, kBufBytes, 3), "");
  std::mutex mu;
  std::vector<std::string> failures;
  test::runRanks(
      n,
      [&](int me) {
        auto fail = [&](const std::string& why) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("rank " + std::to_string(me) + ": " + why);
        };
        if (std::string why = useGpu0(); !why.empty()) return fail(why);
        Plan plan(pairSpec, me, n);
        auto s = static_cast<tsrStream_t>(g.stream(me));
        auto* red = static_cast<float*>(g.buffer(me, 2));
        const size_t kRed = 4096;
        auto calls = [&]() {
          tsrResult_t r = tsrAllReduce(red, red, kRed, tsrFloat32, tsrSum, g.comm(me), s);
          if (r == tsrSuccess) r = tsrGroupStart();
          if (r == tsrSuccess) r = issueCalls(g, plan, me);
          if (r == tsrSuccess) r = tsrGroupEnd();
          if (r == tsrSuccess) r = tsrAllReduce(red, red, kRed, tsrFloat32, tsrSum, g.comm(me), s);
          return r;
        };
        std::vector<float> ones(kRed, 1.0f), got(kRed);
        auto checkRed = [&]() -> std::string {
          std::string why = toHost(got.data(), red, kRed * 4, g.stream(me));
          if (!why.empty()) return why;
          for (size_t i = 0; i < kRed; ++i)
            if (got[i] != 4.0f) return "allreduce element " + std::to_string(i) + " wrong";
          return "";
        };
        std::string why = prepare(g, plan, me, 1);
        if (why.empty()) why = toDevice(red, ones.data(), kRed * 4, g.stream(me));
        if (why.empty() && calls() != tsrSuccess) why = tsrGetLastError(g.comm(me));
        if (why.empty()) why = verify(g, plan, me, 1);
        if (why.empty()) why = checkRed();
        if (!why.empty()) return fail("eager: " + why);
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        if (cudaStreamBeginCapture(static_cast<cudaStream_t>(g.stream(me)),
                                   cudaStreamCaptureModeThreadLocal) != cudaSuccess)
          return fail("cudaStreamBeginCapture");
        tsrResult_t captured = calls();
        cudaError_t ended = cudaStreamEndCapture(static_cast<cudaStream_t>(g.stream(me)), &graph);
        if (captured != tsrSuccess || ended != cudaSuccess)
          return fail(std::string("capture: ") + tsrGetLastError(g.comm(me)));
        if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return fail("instantiate");
        for (uint32_t round = 2; round <= 4 && why.empty(); ++round) {
          why = prepare(g, plan, me, round);
          if (why.empty()) why = toDevice(red, ones.data(), kRed * 4, g.stream(me));
          if (why.empty() &&
              cudaGraphLaunch(exec, static_cast<cudaStream_t>(g.stream(me))) != cudaSuccess)
            why = "cudaGraphLaunch";
          if (why.empty()) why = verify(g, plan, me, round);
          if (why.empty()) why = checkRed();
          if (!why.empty()) fail("replay " + std::to_string(round) + ": " + why);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
      },
      300);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// Rank 0's first call is a group to itself while rank 1 calls nothing: the copies run on rank 0's
// stream before the engine exists (making it is collective, and rank 1 would never join); then
// both ranks exchange as usual. Bytes are checked against what each rank filled.
TEST(GpuSendRecv, SendToSelfAloneNeedsNoPeer) {
  TSR_SKIP_WITHOUT_GPU();
  GpuRanks g;
  ASSERT_EQ(g.init(2, 1 << 20), "");
  ASSERT_EQ(useGpu0(), "");
  const size_t bytes = 4097 * 4;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaMemset(g.buffer(r, 0), 0x11 * (r + 1), bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(g.buffer(r, 1), 0, bytes), cudaSuccess);
  }
  auto s0 = static_cast<tsrStream_t>(g.stream(0));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  ASSERT_EQ(tsrSend(g.buffer(0, 0), 4097, tsrFloat32, 0, g.comm(0), s0), tsrSuccess);
  ASSERT_EQ(tsrRecv(g.buffer(0, 1), 4097, tsrFloat32, 0, g.comm(0), s0), tsrSuccess);
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(waitStream(g.stream(0), 10), "");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  std::vector<uint8_t> got(bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), g.buffer(0, 1), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, std::vector<uint8_t>(bytes, 0x11));
  test::runRanks(2, [&](int me) {
    ASSERT_EQ(useGpu0(), "");
    auto s = static_cast<tsrStream_t>(g.stream(me));
    ASSERT_EQ(tsrGroupStart(), tsrSuccess);
    EXPECT_EQ(tsrSend(g.buffer(me, 0), 4097, tsrFloat32, 1 - me, g.comm(me), s), tsrSuccess);
    EXPECT_EQ(tsrRecv(g.buffer(me, 1), 4097, tsrFloat32, 1 - me, g.comm(me), s), tsrSuccess);
    ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
    EXPECT_EQ(waitStream(g.stream(me), 30), "");
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaMemcpy(got.data(), g.buffer(r, 1), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, std::vector<uint8_t>(bytes, static_cast<uint8_t>(0x11 * (2 - r))))
        << "rank " << r;
  }
}

// Rank 0 receives 12 int32 where rank 1 sends 10: rank 0's stream completes and its async error
// is tsrInvalidUsage naming both sizes.
TEST(GpuSendRecv, SizeMismatchIsAnAsyncError) {
  TSR_SKIP_WITHOUT_GPU();
  GpuRanks g;
  ASSERT_EQ(g.init(2, 1 << 20), "");
  test::runRanks(2, [&](int me) {
    ASSERT_EQ(useGpu0(), "");
    auto s = static_cast<tsrStream_t>(g.stream(me));
    if (me == 1)
      EXPECT_EQ(tsrSend(g.buffer(1, 0), 10, tsrInt32, 0, g.comm(1), s), tsrSuccess);
    else
      EXPECT_EQ(tsrRecv(g.buffer(0, 1), 12, tsrInt32, 1, g.comm(0), s), tsrSuccess);
    EXPECT_EQ(waitStream(g.stream(me), 30), "");
  });
  tsrResult_t async = tsrSuccess;
  ASSERT_EQ(tsrCommGetAsyncError(g.comm(0), &async), tsrSuccess);
  EXPECT_EQ(async, tsrInvalidUsage);
  EXPECT_NE(std::string(tsrGetLastError(g.comm(0))).find("receives 48 bytes from rank 1"),
            std::string::npos)
      << tsrGetLastError(g.comm(0));
}

// After one exchange (the link exists), rank 0 receives from rank 1, which never sends: the stream
// still completes within the deadline and the async error is tsrTimeout. Then the same with
// tsrCommAbort instead of the deadline.
TEST(GpuSendRecv, MissingPeerTimesOutAndAbortEndsAStuckReceive) {
  TSR_SKIP_WITHOUT_GPU();
  for (bool abort : {false, true}) {
    test::ScopedEnv timeout("TESSERA_TRANSPORT_TIMEOUT", abort ? "120" : "2");
    GpuRanks g;
    ASSERT_EQ(g.init(2, 1 << 20), "");
    test::runRanks(2, [&](int me) {
      ASSERT_EQ(useGpu0(), "");
      auto s = static_cast<tsrStream_t>(g.stream(me));
      ASSERT_EQ(tsrGroupStart(), tsrSuccess);
      EXPECT_EQ(tsrSend(g.buffer(me, 0), 1000, tsrFloat32, 1 - me, g.comm(me), s), tsrSuccess);
      EXPECT_EQ(tsrRecv(g.buffer(me, 1), 1000, tsrFloat32, 1 - me, g.comm(me), s), tsrSuccess);
      ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
      EXPECT_EQ(waitStream(g.stream(me), 30), "");
    });
    ASSERT_EQ(tsrRecv(g.buffer(0, 1), 1000, tsrFloat32, 1, g.comm(0),
                      static_cast<tsrStream_t>(g.stream(0))),
              tsrSuccess)
        << tsrGetLastError(g.comm(0));
    const auto t0 = std::chrono::steady_clock::now();
    if (!abort) {
      EXPECT_EQ(waitStream(g.stream(0), 2 + 20), "") << "the stream of the receive without a send";
      tsrResult_t async = tsrSuccess;
      ASSERT_EQ(tsrCommGetAsyncError(g.comm(0), &async), tsrSuccess);
      EXPECT_EQ(async, tsrTimeout) << tsrGetLastError(g.comm(0));
      continue;
    }
    // Gives the receive time to complete if it wrongly did without a send.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_NE(waitStream(g.stream(0), 0), "") << "the receive completed without a send";
    EXPECT_EQ(tsrCommAbort(g.release(0)), tsrSuccess) << tsrGetLastError(nullptr);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
    EXPECT_EQ(waitStream(g.stream(0), 20), "") << "the stream after tsrCommAbort";
  }
}

#else

TEST(GpuSendRecv, NeedsCuda) { TSR_SKIP_WITHOUT_GPU(); }

#endif

}  // namespace
}  // namespace tessera::gputest
