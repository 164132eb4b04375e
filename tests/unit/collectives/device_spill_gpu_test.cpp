// The device executor's kernels and stream memory operations on a GPU (label gpu; skipped with
// the reason elsewhere): kernel resources as the driver sees them (a CTA of the launch bound,
// 256 threads, fits; local memory is printed: it is the stack frame plus spills, which
// device_kernels.no_spill checks at build time), the wait/write semantics the executor relies on
// (GEQ is wrap-aware, EQ exact), and whether the two operations can be captured into a CUDA graph
// and replayed. Word uses the legacy stream's synchronous calls (cudaMemset, cudaMemcpy,
// cudaFree): no resident grid runs in this test for cudaFree to wait on
// (DESIGN.md, "Known hazards"), but a stream that a failed test leaves blocked on a wait would do
// the same, which Word's destructor avoids.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collectives/exec/device/kernels.hpp"
#include "collectives/exec/device/stream_ops.hpp"
#include "core/status.hpp"
#include "support/harness.hpp"

namespace tessera::exec {
namespace {

// Polls the stream for up to 10 s: a wait that is never satisfied must fail the test, not hang it.
bool finishes(cudaStream_t s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

struct Word {
  uint32_t* dev = nullptr;
  cudaStream_t stream = nullptr;
  Word() {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(uint32_t)), cudaSuccess);
    EXPECT_EQ(cudaMemset(dev, 0, sizeof(uint32_t)), cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  }
  ~Word() {
    // cudaFree waits for the device to go idle, which a stream still blocked on a wait that a
    // failed test never satisfied does not: leak the word then, rather than hang.
    const bool idle = cudaStreamQuery(stream) == cudaSuccess;
    cudaStreamDestroy(stream);
    if (idle) cudaFree(dev);
  }
  uint32_t read() {
    uint32_t v = 0;
    EXPECT_EQ(cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

TEST(DeviceKernelsGpu, KernelsFitTheExecutorsCta) {
  TSR_SKIP_WITHOUT_GPU();
  ASSERT_EQ(preloadDeviceKernels(), tsrSuccess) << lastErrorMessage();
  std::vector<DeviceKernelInfo> info;
  ASSERT_EQ(deviceKernelInfo(&info), tsrSuccess) << lastErrorMessage();
  // Every kernel, though they live in several files (kernels_common.hpp), in kernels.hpp's order.
  std::vector<std::string> names;
  for (const DeviceKernelInfo& k : info) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"resident", "trigger", "item", "send/recv trigger",
                                             "send/recv item"}));
  for (const DeviceKernelInfo& k : info) {
    // The interpreter kernels are built with __launch_bounds__(256, 1) (kernels_common.hpp): a
    // 256-thread CTA fits, with up to 255 registers per thread (65536 / 256, capped by the ISA).
    // The one-thread triggers have no bound.
    EXPECT_GE(k.maxThreads, 256) << k.name;
    EXPECT_LE(k.registers, 255) << k.name;
    std::printf("%s kernel: %d registers, %zu local bytes, up to %d threads\n", k.name.c_str(),
                k.registers, k.localBytes, k.maxThreads);
  }
}

TEST(DeviceKernelsGpu, WaitAndWriteInStreamOrder) {
  TSR_SKIP_WITHOUT_GPU();
  std::string why;
  ASSERT_TRUE(streamMemOpsAvailable(&why)) << why;
  Word w;
  ASSERT_EQ(streamWriteValue32(w.stream, w.dev, 5), tsrSuccess) << lastErrorMessage();
  ASSERT_EQ(streamWaitValue32(w.stream, w.dev, 5, false), tsrSuccess);
  ASSERT_EQ(streamWaitValue32(w.stream, w.dev, 3, true), tsrSuccess);
  ASSERT_TRUE(finishes(w.stream));
  // Wrap-aware: 2 is "after" 0xfffffff0 ((int32_t)(2 - 0xfffffff0) = 18 >= 0).
  ASSERT_EQ(streamWriteValue32(w.stream, w.dev, 2), tsrSuccess);
  ASSERT_EQ(streamWaitValue32(w.stream, w.dev, 0xfffffff0u, true), tsrSuccess);
  ASSERT_TRUE(finishes(w.stream));
  EXPECT_EQ(w.read(), 2u);
}

TEST(DeviceKernelsGpu, AWaitHoldsTheStreamUntilTheValueArrives) {
  TSR_SKIP_WITHOUT_GPU();
  Word w;
  uint32_t* flag = nullptr;  // mapped pinned host memory, written by this thread
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(uint32_t), cudaHostAllocMapped),
            cudaSuccess);
  *flag = 0;
  uint32_t* flagDev = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flagDev), flag, 0), cudaSuccess);
  ASSERT_EQ(streamWaitValue32(w.stream, flagDev, 1, false), tsrSuccess);
  ASSERT_EQ(streamWriteValue32(w.stream, w.dev, 9), tsrSuccess);
  // Gives the stream time to run past the wait if it wrongly did not hold.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(cudaStreamQuery(w.stream), cudaErrorNotReady);
  __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  EXPECT_TRUE(finishes(w.stream));
  EXPECT_EQ(w.read(), 9u);
  cudaFreeHost(flag);
}

// The executor's graph call sites capture a write and a wait; each replay must run them again.
TEST(DeviceKernelsGpu, WaitAndWriteAreCapturedAndReplayed) {
  TSR_SKIP_WITHOUT_GPU();
  Word w;
  bool capturing = true;
  ASSERT_EQ(streamIsCapturing(w.stream, &capturing), tsrSuccess);
  EXPECT_FALSE(capturing);
  ASSERT_EQ(cudaStreamBeginCapture(w.stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(streamIsCapturing(w.stream, &capturing), tsrSuccess);
  EXPECT_TRUE(capturing);
  Result wr = streamWriteValue32(w.stream, w.dev, 7);
  Result wa = streamWaitValue32(w.stream, w.dev, 7, false);
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(w.stream, &graph);
  ASSERT_EQ(wr, tsrSuccess) << "cuStreamWriteValue32 is not capturable: " << lastErrorMessage();
  ASSERT_EQ(wa, tsrSuccess) << "cuStreamWaitValue32 is not capturable: " << lastErrorMessage();
  ASSERT_EQ(end, cudaSuccess);
  size_t n = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &n), cudaSuccess);
  EXPECT_EQ(n, 2u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_EQ(cudaMemsetAsync(w.dev, 0, sizeof(uint32_t), w.stream), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, w.stream), cudaSuccess);
    ASSERT_TRUE(finishes(w.stream)) << "replay " << replay;
    EXPECT_EQ(w.read(), 7u) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace tessera::exec
