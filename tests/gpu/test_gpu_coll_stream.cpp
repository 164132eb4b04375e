// The device executor's stream semantics (gpu label), thread ranks sharing GPU 0: calls inside a
// group, CUDA graph capture and replay, a missing peer (the stream still completes within the
// deadline and the communicator reports tsrTimeout), and tsrCommAbort of a stuck call.
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

using Clock = std::chrono::steady_clock;
constexpr size_t kCount = 4096;

std::vector<float> floats(size_t n, int rank, uint32_t seed) {
  std::vector<float> v(n);
  fillPattern(v.data(), n, tsrFloat32, rank, seed);
  return v;
}

// One thread drives every rank's communicator in one group (as a single-process multi-GPU
// framework does): the device calls are enqueued at tsrGroupEnd, in call order.
TEST(GpuCollStream, GroupOfDeviceAllReducesOnOneThread) {
  TSR_SKIP_WITHOUT_GPU();
  const int n = 4;
  GpuRanks g;
  ASSERT_EQ(g.init(n, kCount * sizeof(float)), "");
  std::vector<float> expected(kCount, 0.0f);
  for (int r = 0; r < n; ++r) {
    std::vector<float> in = floats(kCount, r, 7);
    for (size_t i = 0; i < kCount; ++i) expected[i] += in[i];
    ASSERT_EQ(toDevice(g.buffer(r, 0), in.data(), kCount * sizeof(float), g.stream(r)), "");
  }
  for (int round = 0; round < 2; ++round) {  // the second reuses the bound plans
    ASSERT_EQ(tsrGroupStart(), tsrSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(tsrAllReduce(g.buffer(r, 0), g.buffer(r, 1), kCount, tsrFloat32, tsrSum, g.comm(r),
                             static_cast<tsrStream_t>(g.stream(r))),
                tsrSuccess)
          << tsrGetLastError(g.comm(r));
    ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(waitStream(g.stream(r), 30), "") << "rank " << r;
      std::vector<float> out(kCount);
      ASSERT_EQ(toHost(out.data(), g.buffer(r, 1), kCount * sizeof(float), g.stream(r)), "");
      EXPECT_EQ(std::memcmp(out.data(), expected.data(), kCount * sizeof(float)), 0)
          << "rank " << r << " round " << round;
    }
  }
}

// A few collectives captured into one graph per rank, replayed with new input contents each
// time: every replay must give what eager calls give on the same inputs. Buffers: 0 send,
// 1 eager output, 2 graph output.
void captureAndReplay(int n, bool launchMode) {
  test::ScopedEnv launch("TESSERA_LAUNCH", launchMode ? "kernel" : nullptr);
  GpuRanks g;
  const size_t bytes = kCount * static_cast<size_t>(n) * sizeof(float);
  ASSERT_EQ(g.init(n, bytes, 3), "");
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](int r, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back("rank " + std::to_string(r) + ": " + why);
  };
  test::runRanks(
      n,
      [&](int r) {
        if (std::string why = useGpu0(); !why.empty()) return fail(r, why);
        auto s = static_cast<tsrStream_t>(g.stream(r));
        tsrComm_t c = g.comm(r);
        void* in = g.buffer(r, 0);
        // allreduce float32 sum, allgather bfloat16, reducescatter fp8e4m3 max: distinct plans.
        auto calls = [&](void* out) {
          tsrResult_t a = tsrAllReduce(in, out, kCount, tsrFloat32, tsrSum, c, s);
          char* o = static_cast<char*>(out);
          if (a == tsrSuccess) a = tsrAllGather(in, o + kCount * 4, kCount / 8, tsrBfloat16, c, s);
          if (a == tsrSuccess)
            a = tsrReduceScatter(in, o + kCount * 4 + kCount / 8 * 2 * static_cast<size_t>(n),
                                 kCount / 8, tsrFloat8e4m3, tsrMax, c, s);
          return a;
        };
        const size_t outBytes = kCount * 4 + kCount / 8 * 2 * static_cast<size_t>(n) + kCount / 8;
        // Eager once first: plans are bound outside the capture (binding allocates).
        if (calls(g.buffer(r, 1)) != tsrSuccess) return fail(r, tsrGetLastError(c));
        if (std::string why = waitStream(s, 30); !why.empty()) return fail(r, why);
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        // Thread-local capture: the other ranks' threads keep making CUDA calls meanwhile.
        if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
          return fail(r, "cudaStreamBeginCapture failed");
        tsrResult_t captured = calls(g.buffer(r, 2));
        cudaError_t ended = cudaStreamEndCapture(s, &graph);
        if (captured != tsrSuccess || ended != cudaSuccess)
          return fail(r, std::string("capture: ") + tsrGetErrorString(captured) + ": " +
                             tsrGetLastError(c) + " / " + cudaGetErrorString(ended));
        if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
          return fail(r, "cudaGraphInstantiate failed");
        std::vector<unsigned char> eager(outBytes), replay(outBytes);
        for (uint32_t round = 0; round < 4; ++round) {
          std::vector<float> input = floats(bytes / 4, r, 100 + round);
          std::string why = toDevice(in, input.data(), bytes, s);
          if (why.empty() && calls(g.buffer(r, 1)) != tsrSuccess) why = tsrGetLastError(c);
          if (why.empty()) why = waitStream(s, 30);
          if (why.empty()) why = toHost(eager.data(), g.buffer(r, 1), outBytes, s);
          if (why.empty()) why = setDevice(g.buffer(r, 2), 0xa5, outBytes, s);
          if (why.empty() && cudaGraphLaunch(exec, s) != cudaSuccess) why = "cudaGraphLaunch";
          if (why.empty()) why = waitStream(s, 30);
          if (why.empty()) why = toHost(replay.data(), g.buffer(r, 2), outBytes, s);
          if (!why.empty()) {
            fail(r, "round " + std::to_string(round) + ": " + why);
            break;
          }
          if (std::memcmp(eager.data(), replay.data(), outBytes) != 0)
            fail(r, "round " + std::to_string(round) + ": the replay differs from eager calls");
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
      },
      300);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

TEST(GpuCollStream, GraphReplayMatchesEagerPersistent) {
  TSR_SKIP_WITHOUT_GPU();
  captureAndReplay(4, false);
}

TEST(GpuCollStream, GraphReplayMatchesEagerLaunchMode) {
  TSR_SKIP_WITHOUT_GPU();
  captureAndReplay(2, true);
}

// Both ranks make one call together (the plan is bound), then rank 0 calls alone: its stream
// must still complete within the deadline, and its communicator report tsrTimeout.
TEST(GpuCollStream, MissingPeerTimesOutOnTheStream) {
  TSR_SKIP_WITHOUT_GPU();
  test::ScopedEnv timeout("TESSERA_TRANSPORT_TIMEOUT", "2");
  GpuRanks g;
  ASSERT_EQ(g.init(2, kCount * sizeof(float)), "");
  test::runRanks(2, [&](int r) {
    ASSERT_EQ(useGpu0(), "");
    EXPECT_EQ(tsrAllReduce(g.buffer(r, 0), g.buffer(r, 1), kCount, tsrFloat32, tsrSum, g.comm(r),
                           static_cast<tsrStream_t>(g.stream(r))),
              tsrSuccess)
        << tsrGetLastError(g.comm(r));
    EXPECT_EQ(waitStream(g.stream(r), 30), "");
  });
  ASSERT_EQ(tsrAllReduce(g.buffer(0, 0), g.buffer(0, 1), kCount, tsrFloat32, tsrSum, g.comm(0),
                         static_cast<tsrStream_t>(g.stream(0))),
            tsrSuccess)
      << tsrGetLastError(g.comm(0));
  const auto t0 = Clock::now();
  EXPECT_EQ(waitStream(g.stream(0), 2 + 20), "") << "the stream of the call without its peer";
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(waited, 1.0) << "the call completed before its deadline without a peer";
  tsrResult_t async = tsrSuccess;
  ASSERT_EQ(tsrCommGetAsyncError(g.comm(0), &async), tsrSuccess);
  EXPECT_EQ(async, tsrTimeout) << tsrGetErrorString(async) << ": " << tsrGetLastError(g.comm(0));
}

// A call stuck on a missing peer (long deadline): tsrCommAbort returns promptly and the stream
// goes on.
TEST(GpuCollStream, AbortEndsAStuckCall) {
  TSR_SKIP_WITHOUT_GPU();
  test::ScopedEnv timeout("TESSERA_TRANSPORT_TIMEOUT", "120");
  GpuRanks g;
  ASSERT_EQ(g.init(2, kCount * sizeof(float)), "");
  test::runRanks(2, [&](int r) {
    ASSERT_EQ(useGpu0(), "");
    EXPECT_EQ(tsrAllReduce(g.buffer(r, 0), g.buffer(r, 1), kCount, tsrFloat32, tsrSum, g.comm(r),
                           static_cast<tsrStream_t>(g.stream(r))),
              tsrSuccess)
        << tsrGetLastError(g.comm(r));
    EXPECT_EQ(waitStream(g.stream(r), 30), "");
  });
  ASSERT_EQ(tsrAllReduce(g.buffer(0, 0), g.buffer(0, 1), kCount, tsrFloat32, tsrSum, g.comm(0),
                         static_cast<tsrStream_t>(g.stream(0))),
            tsrSuccess)
      << tsrGetLastError(g.comm(0));
  // Gives the call time to complete if it wrongly did without its peer.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_NE(waitStream(g.stream(0), 0), "") << "the call completed without its peer";
  const auto t0 = Clock::now();
  EXPECT_EQ(tsrCommAbort(g.release(0)), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 20.0);
  EXPECT_EQ(waitStream(g.stream(0), 20), "") << "the stream after tsrCommAbort";
}

#else

TEST(GpuCollStream, NeedsCuda) { TSR_SKIP_WITHOUT_GPU(); }

#endif

}  // namespace
}  // namespace tessera::gputest
