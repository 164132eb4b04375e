// The device executor's emulated executing side (executing_side.hpp): the queue in host memory,
// the resident CTAs as host threads running runScheduler<HostGroup>, and launch mode as a fresh
// "grid" of host threads per item, as launchItem's kernel does on a GPU.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/exec/device/executing_side.hpp"
#include "collectives/exec/device/item_runner.hpp"
#include "core/idle_release.hpp"

namespace tessera {
namespace {
class HostSide final : public ExecutingSide {
 public:
  HostSide(const DeviceExecutorOptions& options, HostQueue& hq) : o_(options), hq_(hq) {}

  std::unique_ptr<SideScope> enter() override { return nullptr; }

  Result allocateQueue(size_t deviceBytes, size_t hostBytes, char** dev, char** shared) override {
    device_.reset(new uint64_t[deviceBytes / 8]());
    shared_.reset(new uint64_t[hostBytes / 8]());
    *dev = reinterpret_cast<char*>(device_.get());
    *shared = reinterpret_cast<char*>(shared_.get());
    return tsrSuccess;
  }

  Result startResident() override {
    for (int c = 0; c < o_.ctas; ++c)
      threads_.emplace_back([this, c, n = o_.ctas] {
        exec::DeviceItemRunner<exec::HostGroup> runner{hq_.q};
        exec::runScheduler(hq_.q, exec::HostGroup{}, static_cast<uint32_t>(c),
                           static_cast<uint32_t>(n), 0, runner);
        threadsDone_.fetch_add(1, std::memory_order_release);
      });
    return tsrSuccess;
  }

  bool gridEnded() override {
    return threadsDone_.load(std::memory_order_acquire) == static_cast<int>(threads_.size());
  }

  void postStop() override {
    exec::WorkItem stop{};
    stop.kind = exec::kItemStop;
    (void)exec::postItem(hq_.q, stop);
  }

  void abandon() override {
    for (std::thread& th : threads_) th.detach();
  }

  void quiesce() override {
    for (std::thread& th : threads_) th.join();
  }

  // The emulation's queue blocks stand for the GPU side's device and pinned memory, whose
  // cudaFree / cudaFreeHost wait for an idle device: this free does too (waitIdleLikeCudaFree,
  // with a deadline where a GPU would wait for ever), through the same registry that holds such
  // frees back while a resident grid runs (idle_release.hpp). A free that still finds a grid
  // running is the hang a GPU would show: reported, and the process stops.
  void release() override {
    releaseWhenIdle(kEmulatedDevice, [rank = o_.rank, seconds = std::min(o_.timeoutSeconds, 10.0),
                                      dev = std::shared_ptr<uint64_t[]>(std::move(device_)),
                                      shared = std::shared_ptr<uint64_t[]>(std::move(shared_))] {
      if (waitIdleLikeCudaFree(kEmulatedDevice, seconds)) return;
      std::fprintf(stderr,
                   "tessera: rank %d: the device emulation's free of the work "
                   "queue waited %.3g s for the emulated device to go idle while "
                   "another resident grid of this process still ran; on a GPU "
                   "this cudaFree would never return (DESIGN.md, \"Known "
                   "hazards\")\n",
                   rank, seconds);
      std::abort();
    });
  }

  Result upload(void* dst, const void* src, size_t bytes) override {
    if (src == nullptr)
      std::memset(dst, 0, bytes);
    else
      std::memcpy(dst, src, bytes);
    return tsrSuccess;
  }

  Result post(exec::WorkItem item, void*, const exec::P2PGroupDesc* group,
              exec::P2PGroupDesc* groups) override {
    const exec::WorkQueueHandle& q = hq_.q;
    item.doneWord = hq_.eagerWord;
    item.doneValue = ++hq_.ticket;
    if (o_.mode == LaunchMode::kPersistent) {
      // A failure is recorded and the done word written.
      (void)exec::postItem(q, item, groups, group);
      return tsrSuccess;
    }
    if (group != nullptr) item.p2p = group;  // the threads below run it before post returns
    // Launch mode: a fresh "grid" of host threads runs the item and ends, as launchItem's kernel.
    const auto n = static_cast<uint32_t>(o_.ctas);
    const uint64_t seq = hq_.lastCall;
    std::vector<std::thread> grid;
    for (uint32_t c = 0; c < n; ++c)
      grid.emplace_back([&q, &item, c, n, seq] {
        exec::HostGroup g;
        exec::DeviceItemRunner<exec::HostGroup> runner{q};
        bool ok = !exec::queueFailed(q);
        if (ok) ok = runner.runItem(item, g, c, n);
        if (ok) ok = exec::gridBarrier(q, g, n, seq, item.callNo, static_cast<int32_t>(c));
        if (!ok && device::loadAcquire(&q.error->code) == 0)
          exec::recordError(q, tsrRemoteError,
                            exec::loadAcquire32(q.abortFlag) ? exec::kWhyAbort : exec::kWhyEarlier,
                            seq, item.callNo, static_cast<int32_t>(c), -1, -1, -1);
      });
    for (std::thread& th : grid) th.join();
    exec::storeRelease32(item.doneWord, item.doneValue);
    return tsrSuccess;
  }

  Result capturing(void*, bool* out) override {
    *out = false;
    return tsrSuccess;
  }

  Result ownFailure(std::string*) override { return tsrSuccess; }

 private:
  const DeviceExecutorOptions& o_;
  HostQueue& hq_;
  std::unique_ptr<uint64_t[]> device_, shared_;
  std::vector<std::thread> threads_;
  std::atomic<int> threadsDone_{0};
};

}  // namespace

std::unique_ptr<ExecutingSide> makeHostSide(const DeviceExecutorOptions& options, HostQueue& hq) {
  return std::make_unique<HostSide>(options, hq);
}

}  // namespace tessera
