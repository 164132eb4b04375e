// cuda_ipc between forked processes: 2 and 4 ranks sharing GPU 0 (cuMem VMM memory exported as
// POSIX file descriptors, and cudaMalloc memory exported as legacy IPC handles), ranks on
// separate GPUs where there are several, and 8 ranks sharing GPU 0 with a few plans' worth of
// semaphores per pair (their counters share device slabs: descriptors and imports per slab).
// Through the public API: local registrations (tsrCommRegister) of cudaMalloc memory between
// forked processes on GPU 0, mapped by the peers over cuda_ipc at their first call.
//
// A forked child cannot use CUDA once its parent has initialized it, and asking whether a GPU
// exists (cudaGetDeviceCount) initializes the driver. So this binary's own process never calls
// CUDA: the skip decision is made in a short-lived forked child that reports through a pipe.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/build_config.hpp"
#include "core/cuda_driver.hpp"
#include "tessera/tessera.h"
#if TESSERA_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#include "gpu_transport_body.hpp"
#include "support/harness.hpp"
#include "unit/transport/semaphore_scale.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::test {
namespace {

struct GpuProbe {
  int devices = 0;
  std::string why;  // empty when devices > 0
};

// Asks a child process how many GPUs there are (and why none), so this process stays clean.
GpuProbe probeInChild() {
  GpuProbe probe;
  int fds[2];
  if (pipe(fds) != 0) {
    probe.why = std::string("pipe: ") + std::strerror(errno);
    return probe;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string why = gpuUnavailableReason();
    int n = why.empty() ? cudaDeviceCount(&why) : 0;
    std::string msg = std::to_string(n) + "\n" + why;
    ssize_t unused = write(fds[1], msg.data(), msg.size());
    (void)unused;
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  size_t nl = msg.find('\n');
  if (pid < 0 || nl == std::string::npos) {
    probe.why = "the GPU probe process failed";
    return probe;
  }
  probe.devices = std::atoi(msg.substr(0, nl).c_str());
  probe.why = msg.substr(nl + 1);
  if (probe.devices <= 0 && probe.why.empty()) probe.why = "no CUDA device";
  return probe;
}

const GpuProbe& probe() {
  static const GpuProbe p = probeInChild();
  return p;
}

#define SKIP_WITHOUT_GPU_NO_INIT()                                              \
  do {                                                                          \
    if (probe().devices <= 0) GTEST_SKIP() << "no usable GPU: " << probe().why; \
  } while (0)

void runIpc(int nranks, std::vector<int> devices, bool legacy) {
  RankOptions options;
  options.cudaDevices = std::move(devices);
  options.timeoutSeconds = 30;  // kernels of processes on one GPU take turns (time slices)
  GpuRoundTrip trip;
  trip.kind = TransportKind::kCudaIpc;
  trip.autoSelect = !legacy;
  trip.legacyAllocation = legacy;
  auto results = runTransportRanks(
      RankMode::kProcesses, nranks,
      [&](TransportContext& ctx) { return gpuTransportRoundTrip(ctx, trip); }, options);
  expectAllRanksOk(results);
}

TEST(GpuCudaIpc, TwoProcessesShareGpu0) {
  SKIP_WITHOUT_GPU_NO_INIT();
  runIpc(2, {0}, false);
}

TEST(GpuCudaIpc, FourProcessesShareGpu0) {
  SKIP_WITHOUT_GPU_NO_INIT();
  runIpc(4, {0}, false);
}

TEST(GpuCudaIpc, LegacyIpcHandles) {
  SKIP_WITHOUT_GPU_NO_INIT();
  runIpc(2, {0}, true);
}

// 8 ranks on GPU 0, 32 semaphores per pair (224 per rank): one semaphore used to be a 2 MiB VMM
// allocation with its exported descriptor (and the fd server's duplicate) on each side.
TEST(GpuCudaIpc, EightProcessesManySemaphoresShareSlabs) {
  SKIP_WITHOUT_GPU_NO_INIT();
  RankOptions options;
  options.cudaDevices = {0};
  options.timeoutSeconds = 60;  // kernels of processes on one GPU take turns (time slices)
  options.runSeconds = 240;
  SemaphoreScale scale;
  scale.kind = TransportKind::kCudaIpc;
  scale.mode = RankMode::kProcesses;
  scale.perPair = 32;
  scale.fdBudgetPerRank = 48;  // the driver may open a few of its own on first use
  scale.importsPerPeer = 2;
  scale.fdsKeptPerRank = 8;
  expectAllRanksOk(runTransportRanks(
      RankMode::kProcesses, 8, [&](TransportContext& ctx) { return manySemaphores(ctx, scale); },
      options));
}

#if TESSERA_HAVE_CUDA
// One forked rank: all-reduce twice on a registered buffer (input, then output; each rank's
// buffers at an offset of their own) from cudaMalloc or tsrMemAllocDevice, then once after
// deregistration (staged); results against the serial sum. 0 on success, else why on stderr and a
// nonzero code.
int localRegistrationRank(int r, int n, const tsrUniqueId& id, bool tesseraAlloc) {
  auto bad = [&](const char* what, const char* why) {
    std::fprintf(stderr, "rank %d: %s: %s\n", r, what, why);
    return 1;
  };
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.device = 0;
  tsrComm_t c = nullptr;
  if (tsrCommInitRankConfig(&c, n, id, r, &config) != tsrSuccess)
    return bad("tsrCommInitRankConfig", tsrGetLastError(nullptr));
  constexpr size_t kCount = size_t{1} << 20;
  const size_t skew = 4096 * static_cast<size_t>(r);
  const size_t bytes = 2 * kCount * sizeof(float) + skew;
  char* mem = nullptr;
  if (tesseraAlloc) {
    void* p = nullptr;
    if (tsrMemAllocDevice(&p, bytes, 0) != tsrSuccess)
      return bad("tsrMemAllocDevice", tsrGetLastError(nullptr));
    mem = static_cast<char*>(p);
  } else if (cudaMalloc(&mem, bytes) != cudaSuccess) {
    return bad("cudaMalloc", "failed");
  }
  auto* in = reinterpret_cast<float*>(mem + skew);
  float* out = in + kCount;
  std::vector<float> host(kCount), sum(kCount, 0.0f), got(kCount);
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < kCount; ++i) {
      const float v = static_cast<float>((q + 1) * 3 + static_cast<int>(i % 101));
      sum[i] += v;
      if (q == r) host[i] = v;
    }
  if (cudaMemcpy(in, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
    return bad("cudaMemcpy", "to the device");
  void* h = nullptr;
  if (tsrCommRegister(c, mem, bytes, &h) != tsrSuccess)
    return bad("tsrCommRegister", tsrGetLastError(c));
  for (int round = 0; round < 3; ++round) {  // the second reuses the mappings; the third is staged
    if (round == 2 && tsrCommDeregister(c, h) != tsrSuccess)
      return bad("tsrCommDeregister", tsrGetLastError(c));
    if (cudaMemset(out, 0, kCount * sizeof(float)) != cudaSuccess) return bad("cudaMemset", "");
    if (tsrAllReduce(in, out, kCount, tsrFloat32, tsrSum, c, nullptr) != tsrSuccess)
      return bad("tsrAllReduce", tsrGetLastError(c));
    if (cudaMemcpy(got.data(), out, kCount * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
      return bad("cudaMemcpy", "to the host");
    for (size_t i = 0; i < kCount; ++i)
      if (got[i] != sum[i]) {
        std::fprintf(stderr, "rank %d: round %d: element %zu is %g, expected %g\n", r, round, i,
                     static_cast<double>(got[i]), static_cast<double>(sum[i]));
        return 2;
      }
  }
  if (tsrCommDestroy(c) != tsrSuccess) return bad("tsrCommDestroy", tsrGetLastError(nullptr));
  if (!tesseraAlloc) {
    cudaFree(mem);
  } else if (tsrMemFree(mem) != tsrSuccess) {
    return bad("tsrMemFree", tsrGetLastError(nullptr));
  }
  return 0;
}

// 2 processes on cudaMalloc memory, 4 on tsrMemAllocDevice's.
TEST(GpuCudaIpc, LocalRegistrationsBetweenProcesses) {
  SKIP_WITHOUT_GPU_NO_INIT();
  for (int n : {2, 4}) {
    ScopedEnv ifname("TESSERA_SOCKET_IFNAME", "lo");
    tsrUniqueId id{};
    {
      // No root thread in this process while it forks (forkRanks says why): rank 0 starts it.
      ScopedEnv commId("TESSERA_COMM_ID", loopbackCommId().c_str());
      ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
    }
    std::vector<int> codes = forkRanks(
        n, [&](int r) { return localRegistrationRank(r, n, id, n == 4); }, 180);
    for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
  }
}
#endif

TEST(GpuCudaIpc, SeparateGpus) {
  SKIP_WITHOUT_GPU_NO_INIT();
  if (probe().devices < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << probe().devices;
  std::vector<int> devices;
  for (int d = 0; d < probe().devices && d < 4; ++d) devices.push_back(d);
  runIpc(static_cast<int>(devices.size()), devices, false);
}

}  // namespace
}  // namespace tessera::test
