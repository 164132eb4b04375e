// Every argument check of the collective API: the expected code, a sentence, and no byte written
// (outputs are filled with a sentinel and compared). Checks fail before any peer is involved, so
// one thread calls on one rank and nothing waits. Plus: counts that differ between ranks above
// TESSERA_ZERO_COPY_MIN_BYTES, which the engine's handshake reports as tsrInvalidUsage.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>

#include "core/build_config.hpp"
#include "support/harness.hpp"
#include "unit/collectives/test_api_common.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::apitest {
namespace {

constexpr int32_t kSentinel = 0x5a5a5a5a;
constexpr size_t kCount = 64;

class ApiBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    setTestEnvironment();
    comms_ = std::make_unique<ThreadComms>(kRanks);
    ASSERT_TRUE(comms_->ok()) << comms_->error();
    send_.assign(kCount * kRanks, 7);
    recv_.assign(kCount * kRanks, kSentinel);
  }
  tsrComm_t comm() const { return (*comms_)[0]; }
  int32_t* send() { return send_.data(); }
  int32_t* recv() { return recv_.data(); }

  // The call fails with `code`, says something containing `words`, and writes nothing.
  void expectRefused(const char* what, tsrResult_t code, const char* words,
                     const std::function<tsrResult_t()>& call) {
    SCOPED_TRACE(what);
    const std::vector<int32_t> sendBefore = send_;
    EXPECT_EQ(call(), code);
    const std::string msg = tsrGetLastError(nullptr);
    EXPECT_NE(msg.find(words), std::string::npos) << "sentence: " << msg;
    EXPECT_EQ(recv_, std::vector<int32_t>(kCount * kRanks, kSentinel)) << "recvbuff written";
    EXPECT_EQ(send_, sendBefore) << "sendbuff written";
  }

  static constexpr int kRanks = 2;
  std::unique_ptr<ThreadComms> comms_;
  std::vector<int32_t> send_, recv_;
};

TEST_F(ApiBadInput, NullAndDeadCommunicators) {
  expectRefused("null comm", tsrInvalidArgument, "NULL", [&] {
    return tsrAllReduce(send(), recv(), kCount, tsrInt32, tsrSum, nullptr, nullptr);
  });
  tsrComm_t dead = nullptr;
  {
    ThreadComms one(1);
    ASSERT_TRUE(one.ok());
    dead = one[0];
  }
  expectRefused("destroyed comm", tsrInvalidUsage, "destroyed",
                [&] { return tsrBroadcast(send(), recv(), kCount, tsrInt32, 0, dead, nullptr); });
  expectRefused("made-up handle", tsrInvalidUsage, "not a communicator", [&] {
    return tsrAllGather(send(), recv(), kCount, tsrInt32, reinterpret_cast<tsrComm_t>(recv()),
                        nullptr);
  });
}

TEST_F(ApiBadInput, NullBuffersWithCount) {
  tsrComm_t c = comm();
  const char* kSend = "sendbuff is NULL";
  const char* kRecv = "recvbuff is NULL";
  expectRefused("allreduce send", tsrInvalidArgument, kSend, [&] {
    return tsrAllReduce(nullptr, recv(), kCount, tsrInt32, tsrSum, c, nullptr);
  });
  expectRefused("allreduce recv", tsrInvalidArgument, kRecv, [&] {
    return tsrAllReduce(send(), nullptr, kCount, tsrInt32, tsrSum, c, nullptr);
  });
  expectRefused("reducescatter send", tsrInvalidArgument, kSend, [&] {
    return tsrReduceScatter(nullptr, recv(), kCount, tsrInt32, tsrSum, c, nullptr);
  });
  expectRefused("reducescatter recv", tsrInvalidArgument, kRecv, [&] {
    return tsrReduceScatter(send(), nullptr, kCount, tsrInt32, tsrSum, c, nullptr);
  });
  expectRefused("allgather send", tsrInvalidArgument, kSend,
                [&] { return tsrAllGather(nullptr, recv(), kCount, tsrInt32, c, nullptr); });
  expectRefused("allgather recv", tsrInvalidArgument, kRecv,
                [&] { return tsrAllGather(send(), nullptr, kCount, tsrInt32, c, nullptr); });
  // Rank 0 is the root: its sendbuff (broadcast) and recvbuff (reduce) are required.
  expectRefused("broadcast root send", tsrInvalidArgument, kSend,
                [&] { return tsrBroadcast(nullptr, recv(), kCount, tsrInt32, 0, c, nullptr); });
  expectRefused("broadcast recv", tsrInvalidArgument, kRecv,
                [&] { return tsrBroadcast(send(), nullptr, kCount, tsrInt32, 1, c, nullptr); });
  expectRefused("reduce send", tsrInvalidArgument, kSend, [&] {
    return tsrReduce(nullptr, recv(), kCount, tsrInt32, tsrSum, 1, c, nullptr);
  });
  expectRefused("reduce root recv", tsrInvalidArgument, kRecv, [&] {
    return tsrReduce(send(), nullptr, kCount, tsrInt32, tsrSum, 0, c, nullptr);
  });
  expectRefused("alltoall send", tsrInvalidArgument, kSend,
                [&] { return tsrAlltoAll(nullptr, recv(), kCount, tsrInt32, c, nullptr); });
  expectRefused("alltoall recv", tsrInvalidArgument, kRecv,
                [&] { return tsrAlltoAll(send(), nullptr, kCount, tsrInt32, c, nullptr); });
  expectRefused("send", tsrInvalidArgument, "NULL",
                [&] { return tsrSend(nullptr, kCount, tsrInt32, 1, c, nullptr); });
  expectRefused("recv", tsrInvalidArgument, "NULL",
                [&] { return tsrRecv(nullptr, kCount, tsrInt32, 1, c, nullptr); });
}

// count == 0 is valid with any pointers and returns at once, without peers.
TEST_F(ApiBadInput, ZeroCountIsValidAndTouchesNothing) {
  tsrComm_t c = comm();
  EXPECT_EQ(tsrAllReduce(nullptr, nullptr, 0, tsrInt32, tsrSum, c, nullptr), tsrSuccess);
  EXPECT_EQ(tsrReduceScatter(nullptr, nullptr, 0, tsrInt32, tsrMax, c, nullptr), tsrSuccess);
  EXPECT_EQ(tsrAllGather(nullptr, nullptr, 0, tsrInt32, c, nullptr), tsrSuccess);
  EXPECT_EQ(tsrBroadcast(nullptr, nullptr, 0, tsrInt32, 1, c, nullptr), tsrSuccess);
  EXPECT_EQ(tsrReduce(nullptr, nullptr, 0, tsrInt32, tsrSum, 0, c, nullptr), tsrSuccess);
  EXPECT_EQ(tsrAlltoAll(send(), recv(), 0, tsrInt32, c, nullptr), tsrSuccess);
  EXPECT_EQ(tsrSend(nullptr, 0, tsrInt32, 1, c, nullptr), tsrSuccess);
  EXPECT_EQ(tsrRecv(nullptr, 0, tsrInt32, 1, c, nullptr), tsrSuccess);
  EXPECT_EQ(recv_, std::vector<int32_t>(kCount * kRanks, kSentinel));
}

TEST_F(ApiBadInput, CountsThatOverflow) {
  tsrComm_t c = comm();
  // Too large on its own, and large enough only once multiplied by the 2 ranks.
  const size_t huge = SIZE_MAX / 2;
  const size_t timesRanks = static_cast<size_t>(PTRDIFF_MAX) / 8 / 2 + 1;  // float64
  expectRefused("allreduce huge", tsrInvalidArgument, "PTRDIFF_MAX",
                [&] { return tsrAllReduce(send(), recv(), huge, tsrInt32, tsrSum, c, nullptr); });
  expectRefused("allgather x nranks", tsrInvalidArgument, "PTRDIFF_MAX",
                [&] { return tsrAllGather(send(), recv(), timesRanks, tsrFloat64, c, nullptr); });
  expectRefused("reducescatter x nranks", tsrInvalidArgument, "PTRDIFF_MAX", [&] {
    return tsrReduceScatter(send(), recv(), timesRanks, tsrFloat64, tsrSum, c, nullptr);
  });
  expectRefused("alltoall x nranks", tsrInvalidArgument, "PTRDIFF_MAX",
                [&] { return tsrAlltoAll(send(), recv(), timesRanks, tsrFloat64, c, nullptr); });
  expectRefused("send huge", tsrInvalidArgument, "PTRDIFF_MAX",
                [&] { return tsrSend(send(), SIZE_MAX, tsrInt8, 1, c, nullptr); });
}

TEST_F(ApiBadInput, InvalidDatatypes) {
  tsrComm_t c = comm();
  for (int bad : {-1, static_cast<int>(tsrNumTypes), 1000}) {
    auto dt = static_cast<tsrDataType_t>(bad);
    expectRefused("allreduce", tsrInvalidArgument, "datatype",
                  [&] { return tsrAllReduce(send(), recv(), kCount, dt, tsrSum, c, nullptr); });
    expectRefused("broadcast", tsrInvalidArgument, "datatype",
                  [&] { return tsrBroadcast(send(), recv(), kCount, dt, 0, c, nullptr); });
    expectRefused("alltoall", tsrInvalidArgument, "datatype",
                  [&] { return tsrAlltoAll(send(), recv(), kCount, dt, c, nullptr); });
    expectRefused("recv", tsrInvalidArgument, "datatype",
                  [&] { return tsrRecv(recv(), kCount, dt, 1, c, nullptr); });
  }
}

TEST_F(ApiBadInput, InvalidOps) {
  tsrComm_t c = comm();
  for (int bad : {-1, static_cast<int>(tsrNumOps), 99}) {
    auto op = static_cast<tsrRedOp_t>(bad);
    expectRefused("allreduce", tsrInvalidArgument, "op",
                  [&] { return tsrAllReduce(send(), recv(), kCount, tsrInt32, op, c, nullptr); });
    expectRefused("reduce", tsrInvalidArgument, "op",
                  [&] { return tsrReduce(send(), recv(), kCount, tsrInt32, op, 0, c, nullptr); });
  }
  // A premulsum op made for float32 reduces float32 only; a destroyed one nothing; one made on
  // another communicator is not this communicator's.
  float scalar = 2.0f;
  tsrRedOp_t pm;
  ASSERT_EQ(tsrRedOpCreatePreMulSum(&pm, &scalar, tsrFloat32, tsrScalarHostImmediate, c),
            tsrSuccess);
  expectRefused("premulsum for float32 used with int32", tsrInvalidArgument, "float32",
                [&] { return tsrReduceScatter(send(), recv(), kCount, tsrInt32, pm, c, nullptr); });
  expectRefused("premulsum of another communicator", tsrInvalidArgument, "op", [&] {
    return tsrAllReduce(send(), recv(), kCount, tsrFloat32, pm, (*comms_)[1], nullptr);
  });
  ASSERT_EQ(tsrRedOpDestroy(pm, c), tsrSuccess);
  expectRefused("destroyed premulsum", tsrInvalidArgument, "op",
                [&] { return tsrAllReduce(send(), recv(), kCount, tsrFloat32, pm, c, nullptr); });
}

TEST_F(ApiBadInput, RootsAndPeersOutOfRange) {
  tsrComm_t c = comm();
  for (int bad : {-1, kRanks, 1 << 30}) {
    expectRefused("broadcast root", tsrInvalidArgument, "root",
                  [&] { return tsrBroadcast(send(), recv(), kCount, tsrInt32, bad, c, nullptr); });
    expectRefused("reduce root", tsrInvalidArgument, "root", [&] {
      return tsrReduce(send(), recv(), kCount, tsrInt32, tsrSum, bad, c, nullptr);
    });
    expectRefused("send peer", tsrInvalidArgument, "peer",
                  [&] { return tsrSend(send(), kCount, tsrInt32, bad, c, nullptr); });
    expectRefused("recv peer", tsrInvalidArgument, "peer",
                  [&] { return tsrRecv(recv(), kCount, tsrInt32, bad, c, nullptr); });
  }
  // To self is valid, but only inside a group (its receive must be there too).
  expectRefused("send to self outside a group", tsrInvalidUsage, "group",
                [&] { return tsrSend(send(), kCount, tsrInt32, 0, c, nullptr); });
}

TEST_F(ApiBadInput, AliasedBuffers) {
  tsrComm_t c = comm();
  int32_t* r = recv();
  expectRefused("alltoall in place", tsrInvalidArgument, "in-place",
                [&] { return tsrAlltoAll(r, r, kCount, tsrInt32, c, nullptr); });
  expectRefused("alltoall overlapping", tsrInvalidArgument, "overlap",
                [&] { return tsrAlltoAll(r + 1, r, kCount / 2, tsrInt32, c, nullptr); });
  expectRefused("allreduce shifted by one", tsrInvalidArgument, "overlap",
                [&] { return tsrAllReduce(r + 1, r, kCount, tsrInt32, tsrSum, c, nullptr); });
  expectRefused("broadcast root shifted", tsrInvalidArgument, "overlap",
                [&] { return tsrBroadcast(r, r + 3, kCount, tsrInt32, 0, c, nullptr); });
  // Rank 0's in-place allgather block is at offset 0; block 1's place is rank 1's.
  expectRefused("allgather at another rank's block", tsrInvalidArgument, "overlap",
                [&] { return tsrAllGather(r + kCount, r, kCount, tsrInt32, c, nullptr); });
  expectRefused("reducescatter at another rank's block", tsrInvalidArgument, "overlap", [&] {
    return tsrReduceScatter(r, r + kCount, kCount, tsrInt32, tsrSum, c, nullptr);
  });
}

TEST_F(ApiBadInput, RegistrationAndMemory) {
  tsrComm_t c = comm();
  void* h = nullptr;
  EXPECT_EQ(tsrCommRegister(c, nullptr, 64, &h), tsrInvalidArgument);
  EXPECT_EQ(tsrCommRegister(c, recv(), 0, &h), tsrInvalidArgument);
  EXPECT_EQ(tsrCommRegister(c, recv(), 64, nullptr), tsrInvalidArgument);
  EXPECT_EQ(tsrCommRegister(nullptr, recv(), 64, &h), tsrInvalidArgument);
  EXPECT_EQ(tsrCommDeregister(c, nullptr), tsrInvalidArgument);
  EXPECT_EQ(tsrCommDeregister(c, recv()), tsrInvalidArgument);  // not a handle
  // Registration is local: no peer takes part, even before the first collective.
  ASSERT_EQ(tsrCommRegister(c, recv(), 64, &h), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDeregister((*comms_)[1], h), tsrInvalidArgument) << "another comm's handle";
  EXPECT_EQ(tsrCommDeregister(c, h), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDeregister(c, h), tsrInvalidArgument) << "deregistered twice";
  EXPECT_NE(std::strstr(tsrGetLastError(nullptr), "already deregistered"), nullptr);

  // Windows: refused arguments are local, before any peer takes part.
  tsrWindow_t w = nullptr;
  EXPECT_EQ(tsrCommWindowRegister(c, nullptr, 64, &w, TSR_WIN_DEFAULT), tsrInvalidArgument);
  EXPECT_EQ(tsrCommWindowRegister(c, recv(), 0, &w, TSR_WIN_DEFAULT), tsrInvalidArgument);
  EXPECT_EQ(tsrCommWindowRegister(c, recv(), 64, nullptr, TSR_WIN_DEFAULT), tsrInvalidArgument);
  EXPECT_EQ(tsrCommWindowRegister(c, recv(), 64, &w, 0x4), tsrInvalidArgument) << "unknown flag";
  EXPECT_NE(std::strstr(tsrGetLastError(nullptr), "TSR_WIN_COLL_SYMMETRIC"), nullptr);
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(tsrCommWindowRegister(nullptr, recv(), 64, &w, TSR_WIN_DEFAULT), tsrInvalidArgument);
  EXPECT_EQ(tsrCommWindowDeregister(c, nullptr), tsrInvalidArgument);
  EXPECT_EQ(tsrCommWindowDeregister(c, reinterpret_cast<tsrWindow_t>(recv())), tsrInvalidArgument);
  // On host memory a window is a local registration: no peer takes part here either.
  ASSERT_EQ(tsrCommWindowRegister(c, recv(), 64, &w, TSR_WIN_COLL_SYMMETRIC), tsrSuccess)
      << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDeregister(c, w), tsrInvalidArgument) << "a window is not a registration";
  EXPECT_EQ(tsrCommWindowDeregister((*comms_)[1], w), tsrInvalidArgument) << "another comm's";
  EXPECT_EQ(tsrCommWindowDeregister(c, w), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommWindowDeregister(c, w), tsrInvalidArgument) << "deregistered twice";

  void* p = nullptr;
  EXPECT_EQ(tsrMemAlloc(nullptr, 64), tsrInvalidArgument);
  EXPECT_EQ(tsrMemAlloc(&p, 0), tsrInvalidArgument);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(tsrMemFree(nullptr), tsrInvalidArgument);
  EXPECT_EQ(tsrMemFree(recv()), tsrInvalidArgument);  // not from tsrMemAlloc
  ASSERT_EQ(tsrMemAlloc(&p, 3 * 4096 + 1), tsrSuccess) << tsrGetLastError(nullptr);
  std::memset(p, 1, 3 * 4096 + 1);
  EXPECT_EQ(tsrMemFree(p), tsrSuccess);
  EXPECT_EQ(tsrMemFree(p), tsrInvalidArgument) << "freed twice";

  // Device memory: bad arguments first; on a machine without a GPU (this one in CI) a sentence
  // saying so and no pointer. tests/gpu covers the allocation itself.
  p = reinterpret_cast<void*>(1);
  EXPECT_EQ(tsrMemAllocDevice(nullptr, 64, -1), tsrInvalidArgument);
  EXPECT_EQ(tsrMemAllocDevice(&p, 0, -1), tsrInvalidArgument);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(tsrMemAllocDevice(&p, 64, -2), tsrInvalidArgument);
  if (!test::gpuUnavailableReason().empty()) {
    EXPECT_EQ(tsrMemAllocDevice(&p, 64, -1), tsrInvalidUsage);
    EXPECT_EQ(p, nullptr);
    const std::string why = tsrGetLastError(nullptr);
    EXPECT_TRUE(why.find("no CUDA device") != std::string::npos ||
                why.find("CUDA was not found") != std::string::npos)
        << why;
  }
}

TEST_F(ApiBadInput, FinalizedCommunicatorRefusesCalls) {
  ThreadComms one(1);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(tsrCommFinalize(one[0]), tsrSuccess);
  expectRefused("after finalize", tsrInvalidUsage, "finalized", [&] {
    return tsrAllReduce(send(), recv(), kCount, tsrInt32, tsrSum, one[0], nullptr);
  });
}

// Device buffers go to the device executor only when they are memory of the rank's own GPU and
// both buffers of the call are: a host-only rank and a host/device mix are refused before anything
// is enqueued (so these need no executor and never launch a kernel). Device send/recv runs on the
// device executor (tests/gpu/test_gpu_sendrecv.cpp).
TEST_F(ApiBadInput, DeviceBuffersNeedAGpuRankAndBothOnDevice) {
  TSR_SKIP_WITHOUT_GPU();
#if TESSERA_HAVE_CUDA
  void* dev = nullptr;
  void* managed = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, kCount * 4), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, kCount * 4), cudaSuccess);
  {
    tsrComm_t c = comm();  // host-only ranks (TSR_DEVICE_HOST)
    expectRefused("device recvbuff, host-only rank", tsrInvalidUsage, "host-only",
                  [&] { return tsrAllReduce(send(), dev, kCount, tsrInt32, tsrSum, c, nullptr); });
    expectRefused("device sendbuff, host-only rank", tsrInvalidUsage, "host-only",
                  [&] { return tsrBroadcast(dev, recv(), kCount, tsrInt32, 0, c, nullptr); });
    expectRefused("managed sendbuff, host-only rank", tsrInvalidUsage, "host-only",
                  [&] { return tsrSend(managed, kCount, tsrInt32, 1, c, nullptr); });
    void* h = nullptr;
    EXPECT_EQ(tsrCommRegister(c, dev, kCount * 4, &h), tsrInvalidUsage);
  }
  {
    std::vector<tsrComm_t> gpu(2, nullptr);
    int devs[2] = {0, 0};
    ASSERT_EQ(tsrCommInitAll(gpu.data(), 2, devs), tsrSuccess) << tsrGetLastError(nullptr);
    expectRefused("host send, device recv", tsrInvalidUsage, "both buffers", [&] {
      return tsrAllReduce(send(), dev, kCount, tsrInt32, tsrSum, gpu[0], nullptr);
    });
    expectRefused("device send, host recv", tsrInvalidUsage, "both buffers",
                  [&] { return tsrAllGather(dev, recv(), kCount / 2, tsrInt32, gpu[0], nullptr); });
    // A local registration of device memory is kept locally (calls on it are staged; windows
    // are the zero-copy path, tests/gpu/test_gpu_windows.cpp).
    void* h = nullptr;
    EXPECT_EQ(tsrCommRegister(gpu[0], dev, kCount * 4, &h), tsrSuccess) << tsrGetLastError(nullptr);
    EXPECT_EQ(tsrCommDeregister(gpu[0], h), tsrSuccess);
    for (tsrComm_t g : gpu) EXPECT_EQ(tsrCommDestroy(g), tsrSuccess);
  }
  cudaFree(dev);  // after the communicators: no executor may still run
  cudaFree(managed);
  // Pinned host memory is host memory: the host executor runs it (one rank: no peer needed).
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, kCount * 4), cudaSuccess);
  ThreadComms one(1);
  ASSERT_TRUE(one.ok());
  std::memset(pinned, 0, kCount * 4);
  EXPECT_EQ(tsrAllReduce(send(), pinned, kCount, tsrInt32, tsrSum, one[0], nullptr), tsrSuccess)
      << tsrGetLastError(nullptr);
  EXPECT_EQ(static_cast<int32_t*>(pinned)[kCount - 1], 7);
  cudaFreeHost(pinned);
#endif
}

// Ranks that disagree on the count of a large call: the engine's handshake (which exchanges
// registrations above TESSERA_ZERO_COPY_MIN_BYTES) tells both, instead of hanging or corrupting.
TEST(ApiMismatch, CountsThatDifferBetweenRanksAreInvalidUsage) {
  setTestEnvironment();
  test::ScopedEnv zeroCopyMin("TESSERA_ZERO_COPY_MIN_BYTES", "1024");
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<tsrResult_t> results(2, tsrSuccess);
  std::vector<std::string> errors(2);
  std::vector<std::vector<float>> out(2);
  test::runRanks(
      2,
      [&](int r) {
        const size_t count = r == 0 ? 10000 : 20000;
        std::vector<float> in(count, 1.0f);
        out[static_cast<size_t>(r)].assign(count, -3.0f);
        results[static_cast<size_t>(r)] =
            tsrAllReduce(in.data(), out[static_cast<size_t>(r)].data(), count, tsrFloat32, tsrSum,
                         comms[r], nullptr);
        errors[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
      },
      60);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)], tsrInvalidUsage)
        << "rank " << r << ": " << errors[static_cast<size_t>(r)];
    EXPECT_EQ(out[static_cast<size_t>(r)],
              std::vector<float>(out[static_cast<size_t>(r)].size(), -3.0f))
        << "rank " << r << ": output written";
  }
}

}  // namespace
}  // namespace tessera::apitest
