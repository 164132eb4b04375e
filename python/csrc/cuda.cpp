#include "cuda.hpp"

#include <climits>
#include <string>

#include "types.hpp"

#if TESSERA_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tessera_torch {
namespace {

[[noreturn]] void noCuda() {
  throwResult(tsrInvalidUsage,
              "this tessera_torch was built without CUDA (torch or the CUDA toolkit had none at "
              "build time): CUDA tensors cannot be used; rebuild it where both are present");
}

tsrConfig_t deviceConfig(int device, int timeoutMs) {
  tsrConfig_t cfg = TSR_CONFIG_INITIALIZER;
  cfg.device = device;
  cfg.blocking = 1;
  cfg.timeoutMs = timeoutMs;
  return cfg;
}

}  // namespace

DeviceState::DeviceState(tsrComm_t hostComm, int rank, int size,
                         c10::intrusive_ptr<c10d::Store> store, int timeoutMs)
    : hostComm_(hostComm),
      rank_(rank),
      size_(size),
      store_(std::move(store)),
      timeoutMs_(timeoutMs) {}

DeviceState::~DeviceState() { destroyAll(false); }

#if TESSERA_TORCH_CUDA

bool DeviceState::built() { return true; }

tsrComm_t DeviceState::collComm(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = coll_.find(device);
  if (it != coll_.end()) return it->second;
  tsrConfig_t cfg = deviceConfig(device, timeoutMs_);
  tsrComm_t c = nullptr;
  check(tsrCommSplit(hostComm_, 0, rank_, &c, &cfg), "tsrCommSplit (device communicator)");
  coll_[device] = c;
  return c;
}

tsrComm_t DeviceState::pairComm(int peer, int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(peer, device);
  auto it = pairs_.find(key);
  if (it != pairs_.end()) return it->second;
  const int lo = std::min(rank_, peer), hi = std::max(rank_, peer);
  const std::string storeKey = "tessera_pair_" + std::to_string(lo) + "_" + std::to_string(hi);
  tsrUniqueId id;
  if (rank_ == lo) {
    check(tsrGetUniqueId(&id), "tsrGetUniqueId");
    store_->set(storeKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    std::vector<uint8_t> v = store_->get(storeKey);
    if (v.size() != sizeof id.internal)
      throwResult(tsrInvalidUsage, "the store holds " + std::to_string(v.size()) + " bytes under " +
                                       storeKey + ", not a tessera unique id");
    std::copy(v.begin(), v.end(), id.internal);
  }
  tsrConfig_t cfg = deviceConfig(device, timeoutMs_);
  tsrComm_t c = nullptr;
  check(tsrCommInitRankConfig(&c, 2, id, rank_ == lo ? 0 : 1, &cfg),
        "tsrCommInitRankConfig (device pair)");
  if (rank_ == lo) store_->deleteKey(storeKey);  // both joined: the id is used up
  pairs_[key] = c;
  return c;
}

void* DeviceState::stream(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(device);
  if (it == streams_.end()) {
    auto s = std::make_shared<c10::cuda::CUDAStream>(c10::cuda::getStreamFromPool(
        /*isHighPriority=*/false, static_cast<c10::DeviceIndex>(device)));
    it = streams_.emplace(device, s).first;
  }
  return static_cast<c10::cuda::CUDAStream*>(it->second.get())->stream();
}

Fence DeviceState::capture(int device) {
  auto ev = std::make_shared<at::cuda::CUDAEvent>();
  ev->record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)));
  return Fence{ev, device};
}

std::shared_ptr<void> DeviceState::before(const Fence& fence) {
  stream(fence.device);
  std::shared_ptr<void> s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = streams_[fence.device];
  }
  auto cs = *static_cast<c10::cuda::CUDAStream*>(s.get());
  static_cast<at::cuda::CUDAEvent*>(fence.event.get())->block(cs);
  return std::make_shared<c10::cuda::CUDAStreamGuard>(cs);
}

void DeviceState::synchronize() {
  std::vector<std::shared_ptr<void>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [d, s] : streams_) all.push_back(s);
  }
  for (auto& s : all) static_cast<c10::cuda::CUDAStream*>(s.get())->synchronize();
}

void DeviceState::after(TesseraWork* work, const std::vector<at::Tensor>& tensors, int device) {
  std::shared_ptr<void> s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = streams_[device];
  }
  auto cs = *static_cast<c10::cuda::CUDAStream*>(s.get());
  auto end = std::make_shared<at::cuda::CUDAEvent>();
  end->record(cs);
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.is_cuda())
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), cs);
  c10::cuda::CUDAStreamGuard guard(cs);
  // The calls of a coalesced batch complete with it.
  std::vector<TesseraWork*> works{work};
  for (auto& w : work->linked) works.push_back(w.get());
  for (TesseraWork* w : works) {
    w->deviceQuery = [end] { return end->query(); };
    w->deviceBlock = [end, device] {
      end->block(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)));
    };
    w->completeFutureOnStream();
  }
}

#else  // no CUDA in this build

bool DeviceState::built() { return false; }
tsrComm_t DeviceState::collComm(int) { noCuda(); }
tsrComm_t DeviceState::pairComm(int, int) { noCuda(); }
void* DeviceState::stream(int) { noCuda(); }
Fence DeviceState::capture(int) { noCuda(); }
std::shared_ptr<void> DeviceState::before(const Fence&) { noCuda(); }
void DeviceState::synchronize() {}
void DeviceState::after(TesseraWork*, const std::vector<at::Tensor>&, int) { noCuda(); }

#endif

void DeviceState::abortAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [d, c] : coll_) tsrCommAbort(c);
  for (auto& [k, c] : pairs_) tsrCommAbort(c);
  coll_.clear();
  pairs_.clear();
}

void DeviceState::destroyAll(bool orderly) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [d, c] : coll_) {
    if (orderly) tsrCommFinalize(c);
    tsrCommDestroy(c);
  }
  // Pair communicators are not collective over the group: a peer may be done with the pair long
  // before this rank ends, so they end locally.
  for (auto& [k, c] : pairs_) tsrCommDestroy(c);
  coll_.clear();
  pairs_.clear();
}

}  // namespace tessera_torch
