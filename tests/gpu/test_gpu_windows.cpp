// Windows on the GPU (gpu label): thread ranks sharing GPU 0 register their device buffers with
// tsrCommWindowRegister (p2p mappings), and all-reduce, all-gather and reduce-scatter on them run
// zero-copy on the device executor; results against the serial sums; a call outside the windows
// and a call after deregistration (both staged) give the same. Local registrations
// (tsrCommRegister) of the same thread ranks: zero-copy through the boards. Written without a GPU
// (it skips here).
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/build_config.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"
#include "test_gpu_coll_ranks.hpp"

namespace tessera::gputest {
namespace {

#if TESSERA_HAVE_CUDA

constexpr size_t kCount = size_t{1} << 20;  // floats per rank's input

// Buffers: 0 the window (input, then output), 1 outside any window.
void windowsAt(int n) {
  GpuRanks g;
  const size_t outElems = kCount * static_cast<size_t>(n);
  const size_t bytes = (kCount + outElems) * sizeof(float);
  ASSERT_EQ(g.init(n, bytes, 2), "");
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](int r, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back("rank " + std::to_string(r) + ": " + why);
  };
  std::vector<std::vector<float>> inputs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    inputs[static_cast<size_t>(r)].resize(kCount);
    fillPattern(inputs[static_cast<size_t>(r)].data(), kCount, tsrFloat32, r, 11);
  }
  std::vector<float> sum(kCount, 0.0f);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < kCount; ++i) sum[i] += inputs[static_cast<size_t>(r)][i];
  test::runRanks(
      n,
      [&](int r) {
        if (std::string why = useGpu0(); !why.empty()) return fail(r, why);
        auto s = static_cast<tsrStream_t>(g.stream(r));
        tsrComm_t c = g.comm(r);
        auto* win = static_cast<float*>(g.buffer(r, 0));
        float* in = win;
        float* out = win + kCount;
        tsrWindow_t w = nullptr;
        if (tsrCommWindowRegister(c, win, bytes, &w, TSR_WIN_COLL_SYMMETRIC) != tsrSuccess)
          return fail(r, std::string("tsrCommWindowRegister: ") + tsrGetLastError(c));
        const std::vector<float>& mine = inputs[static_cast<size_t>(r)];
        std::string why = toDevice(in, mine.data(), kCount * sizeof(float), s);
        std::vector<float> got(outElems);
        auto check = [&](const char* what, size_t elems, auto want) {
          if (!why.empty()) return;
          why = waitStream(s, 60);
          if (why.empty()) why = toHost(got.data(), out, elems * sizeof(float), s);
          for (size_t i = 0; why.empty() && i < elems; ++i)
            if (got[i] != want(i))
              why = std::string(what) + ": element " + std::to_string(i) + " is " +
                    std::to_string(got[i]) + ", expected " + std::to_string(want(i));
        };
        if (why.empty() && tsrAllReduce(in, out, kCount, tsrFloat32, tsrSum, c, s) != tsrSuccess)
          why = tsrGetLastError(c);
        check("all-reduce", kCount, [&](size_t i) { return sum[i]; });
        if (why.empty() && tsrAllGather(in, out, kCount, tsrFloat32, c, s) != tsrSuccess)
          why = tsrGetLastError(c);
        check("all-gather", outElems, [&](size_t i) { return inputs[i / kCount][i % kCount]; });
        const size_t share = kCount / static_cast<size_t>(n);
        if (why.empty() && tsrReduceScatter(in, out, share, tsrFloat32, tsrSum, c, s) != tsrSuccess)
          why = tsrGetLastError(c);
        check("reduce-scatter", share,
              [&](size_t i) { return sum[static_cast<size_t>(r) * share + i]; });
        // Outside the windows (staged): the same all-reduce.
        auto* plain = static_cast<float*>(g.buffer(r, 1));
        if (why.empty()) why = toDevice(plain, mine.data(), kCount * sizeof(float), s);
        if (why.empty() && tsrAllReduce(plain, out, kCount, tsrFloat32, tsrSum, c, s) != tsrSuccess)
          why = tsrGetLastError(c);
        check("all-reduce outside the window", kCount, [&](size_t i) { return sum[i]; });
        if (!why.empty()) return fail(r, why);
        if (tsrCommWindowDeregister(c, w) != tsrSuccess)
          return fail(r, std::string("tsrCommWindowDeregister: ") + tsrGetLastError(c));
        // After deregistration: staged, same result.
        if (tsrAllReduce(in, out, kCount, tsrFloat32, tsrSum, c, s) != tsrSuccess)
          return fail(r, tsrGetLastError(c));
        check("all-reduce after deregistration", kCount, [&](size_t i) { return sum[i]; });
        if (!why.empty()) fail(r, why);
      },
      120);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// Local registrations (tsrCommRegister) of ranks of one process: zero-copy through the boards.
// Buffer 1 holds the input, then the output.
void localRegistrationsAt(int n) {
  GpuRanks g;
  const size_t bytes = 2 * kCount * sizeof(float);
  ASSERT_EQ(g.init(n, bytes, 2), "");
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](int r, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back("rank " + std::to_string(r) + ": " + why);
  };
  std::vector<float> sum(kCount, 0.0f);
  std::vector<std::vector<float>> inputs(static_cast<size_t>(n), std::vector<float>(kCount));
  for (int r = 0; r < n; ++r) {
    fillPattern(inputs[static_cast<size_t>(r)].data(), kCount, tsrFloat32, r, 17);
    for (size_t i = 0; i < kCount; ++i) sum[i] += inputs[static_cast<size_t>(r)][i];
  }
  test::runRanks(
      n,
      [&](int r) {
        if (std::string why = useGpu0(); !why.empty()) return fail(r, why);
        auto s = static_cast<tsrStream_t>(g.stream(r));
        tsrComm_t c = g.comm(r);
        auto* in = static_cast<float*>(g.buffer(r, 1));
        float* out = in + kCount;
        void* h = nullptr;
        if (tsrCommRegister(c, in, bytes, &h) != tsrSuccess)
          return fail(r, std::string("tsrCommRegister: ") + tsrGetLastError(c));
        std::string why = toDevice(in, inputs[static_cast<size_t>(r)].data(), kCount * 4, s);
        for (int round = 0; round < 2 && why.empty(); ++round) {  // the second reuses the boards
          if (tsrAllReduce(in, out, kCount, tsrFloat32, tsrSum, c, s) != tsrSuccess)
            why = tsrGetLastError(c);
          if (why.empty()) why = waitStream(s, 60);
          std::vector<float> got(kCount);
          if (why.empty()) why = toHost(got.data(), out, kCount * 4, s);
          for (size_t i = 0; why.empty() && i < kCount; ++i)
            if (got[i] != sum[i]) why = "element " + std::to_string(i) + " is wrong";
        }
        if (!why.empty()) return fail(r, why);
        if (tsrCommDeregister(c, h) != tsrSuccess)
          fail(r, std::string("tsrCommDeregister: ") + tsrGetLastError(c));
      },
      120);
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

TEST(GpuWindows, LocalRegistrationsOnFourRanks) {
  TSR_SKIP_WITHOUT_GPU();
  localRegistrationsAt(4);
}

TEST(GpuWindows, ZeroCopyCollectivesOnTwoRanks) {
  TSR_SKIP_WITHOUT_GPU();
  windowsAt(2);
}

TEST(GpuWindows, ZeroCopyCollectivesOnFourRanks) {
  TSR_SKIP_WITHOUT_GPU();
  windowsAt(4);
}

TEST(GpuWindows, ZeroCopyCollectivesOnEightRanks) {
  TSR_SKIP_WITHOUT_GPU();
  windowsAt(8);
}

#else

TEST(GpuWindows, NeedsCuda) { TSR_SKIP_WITHOUT_GPU(); }

#endif

}  // namespace
}  // namespace tessera::gputest
