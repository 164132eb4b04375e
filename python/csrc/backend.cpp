// TesseraBackend's life: creation through the store, splits, the call queue, coalescing, abort
// and shutdown. The collectives are in collectives.cpp.
#include "backend.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "cuda.hpp"
#include "types.hpp"

namespace tessera_torch {
namespace {

constexpr const char* kUniqueIdKey = "tessera_unique_id";

int timeoutMs(std::chrono::milliseconds t) {
  if (t.count() <= 0) return TSR_CONFIG_UNDEF_INT;  // TESSERA_*_TIMEOUT
  return static_cast<int>(std::min<int64_t>(t.count(), INT_MAX));
}

tsrConfig_t hostConfig(std::chrono::milliseconds timeout) {
  tsrConfig_t cfg = TSR_CONFIG_INITIALIZER;
  cfg.device = TSR_DEVICE_HOST;  // CUDA tensors get communicators of their own (cuda.hpp)
  cfg.blocking = 1;
  cfg.timeoutMs = timeoutMs(timeout);
  return cfg;
}

}  // namespace

TesseraBackend::TesseraBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                               std::chrono::milliseconds timeout, std::string groupName)
    : c10d::Backend(rank, size),
      options_(c10::make_intrusive<Options>("tessera", timeout)),
      store_(store),
      timeout_(timeout) {
  options_->group_name = std::move(groupName);
  tsrUniqueId id;
  if (rank == 0) {
    check(tsrGetUniqueId(&id), "tsrGetUniqueId");
    store->set(kUniqueIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    std::vector<uint8_t> v = store->get(kUniqueIdKey);  // waits, within the store's timeout
    if (v.size() != sizeof id.internal)
      throwResult(tsrInvalidUsage, "the store holds " + std::to_string(v.size()) + " bytes under " +
                                       kUniqueIdKey + ", not a tessera unique id");
    std::copy(v.begin(), v.end(), id.internal);
  }
  tsrConfig_t cfg = hostConfig(timeout);
  check(tsrCommInitRankConfig(&comm_, size, id, rank, &cfg), "tsrCommInitRankConfig");
  // Every rank joined the root, so every rank read the id: a later group on the same store must
  // not find it (it names a root that served this communicator only).
  if (rank == 0) store->deleteKey(kUniqueIdKey);
  check(tsrCommSplit(comm_, 0, rank, &p2pComm_, nullptr), "tsrCommSplit (send/recv)");
  setupQueue();
}

TesseraBackend::TesseraBackend(tsrComm_t comm, tsrComm_t p2pComm, int rank, int size,
                               std::chrono::milliseconds timeout, std::string groupName,
                               c10::intrusive_ptr<c10d::Store> store)
    : c10d::Backend(rank, size),
      options_(c10::make_intrusive<Options>("tessera", timeout)),
      store_(std::move(store)),
      timeout_(timeout),
      comm_(comm),
      p2pComm_(p2pComm) {
  options_->group_name = std::move(groupName);
  setupQueue();
}

void TesseraBackend::setupQueue() {
  const char* check = std::getenv("TESSERA_TORCH_CHECK_CALLS");
  checkCalls_ = check != nullptr && std::string(check) == "1";
  queue_ = std::make_shared<CallQueue>("tessera pg " + options_->group_name);
  device_ = std::make_unique<DeviceState>(comm_, rank_, size_, store_, timeoutMs(timeout_));
  p2p_ = std::make_unique<P2P>(
      p2pComm_, rank_, size_,
      [this](int peer, int device) { return device_->pairComm(peer, device); },
      [this](int device) { return device_->stream(device); });
  // Receive from any source needs every pair linked; a link costs 512 KiB of host memory per
  // peer, so only groups up to TESSERA_TORCH_ANY_SOURCE_RANKS make them all now (collective:
  // every rank of the group is in this constructor).
  long limit = 32;
  if (const char* v = std::getenv("TESSERA_TORCH_ANY_SOURCE_RANKS"); v != nullptr && *v != '\0')
    limit = std::strtol(v, nullptr, 10);
  anySource_ = size_ <= limit;
  if (anySource_ && size_ > 1) p2p_->connectAll();
}

c10::intrusive_ptr<TesseraBackend> TesseraBackend::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, std::string groupName) {
  return c10::make_intrusive<TesseraBackend>(store, rank, size, timeout, std::move(groupName));
}

TesseraBackend::~TesseraBackend() {
  // Without shutdown() (destroy_process_group) the end is local: a destructor must not wait for
  // peers that may never come.
  {
    std::lock_guard<std::mutex> lock(stateMutex_);
    if (!closed_) failed_ = true;
  }
  try {
    shutdown();
  } catch (...) {
  }
}

void TesseraBackend::setTimeout(std::chrono::milliseconds timeout) {
  // Works made from now on wait this long; tessera's own deadlines were fixed at creation.
  timeout_ = timeout;
  options_->timeout = timeout;
}

void TesseraBackend::checkOpen(const char* api) const {
  if (closed_)
    throwResult(tsrInvalidUsage, std::string(api) +
                                     ": this process group was aborted or shut down; it runs no "
                                     "more calls");
}

tsrComm_t TesseraBackend::commFor(const at::Tensor& t) {
  if (!t.is_cuda()) return comm_;
  return device_->collComm(t.get_device());
}

void* TesseraBackend::streamFor(const at::Tensor& t) {
  return t.is_cuda() ? device_->stream(t.get_device()) : nullptr;
}

void TesseraBackend::verifyCall(const std::string& signature) {
  constexpr size_t kWidth = 96;
  std::vector<char> all(kWidth * static_cast<size_t>(size_), 0);
  std::vector<char> mine(kWidth, 0);
  std::memcpy(mine.data(), signature.data(), std::min(signature.size(), kWidth - 1));
  check(tsrAllGather(mine.data(), all.data(), kWidth, tsrUint8, comm_, nullptr),
        "tsrAllGather (TESSERA_TORCH_CHECK_CALLS)");
  for (int r = 0; r < size_; ++r) {
    std::string theirs(all.data() + static_cast<size_t>(r) * kWidth);
    if (theirs != std::string(mine.data()))
      throwResult(tsrInvalidUsage, "rank " + std::to_string(rank_) + " calls " + mine.data() +
                                       " but rank " + std::to_string(r) + " calls " + theirs +
                                       " in the same turn (TESSERA_TORCH_CHECK_CALLS=1)");
  }
}

void TesseraBackend::runSteps(std::vector<Steps*>& calls) {
  std::vector<P2POp> p2p;
  int issuers = 0;
  for (Steps* c : calls) {
    if (c->issue) ++issuers;
    p2p.insert(p2p.end(), c->p2p.begin(), c->p2p.end());
  }
  if (issuers == 1) {
    // One call groups its own tessera calls when it makes several (a group of one costs more).
    for (Steps* c : calls)
      if (c->issue) c->issue();
  } else if (issuers > 1) {
    TsrGroup g;
    for (Steps* c : calls)
      if (c->issue) c->issue();
    g.end();
  }
  if (!p2p.empty()) p2p_->run(p2p);
  for (Steps* c : calls)
    if (c->finish) c->finish();
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::submit(c10d::OpType type, const char* title,
                                                      std::vector<at::Tensor> outputs, bool async,
                                                      Steps steps, const at::Tensor& device) {
  checkOpen(title);
  ++calls_;
  const bool onDevice = device.defined() && device.is_cuda();
  Fence fence;
  if (onDevice) fence = device_->capture(device.get_device());  // throws without CUDA
  std::vector<c10::Device> devices;
  if (onDevice) devices.push_back(device.device());
  auto work = c10::make_intrusive<TesseraWork>(queue_, rank_, type, title, std::move(outputs),
                                               std::move(devices), timeout_);
  if (coalescing_) {
    batch_.push_back(Recorded{std::move(steps), work});
    return work;
  }
  TesseraWork* w = work.get();  // the job holds the work
  auto body = [this, s = std::move(steps), fence, w, onDevice]() mutable {
    try {
      std::shared_ptr<void> onStream;  // device calls: the group's stream is current
      if (onDevice) onStream = device_->before(fence);
      if (checkCalls_ && !s.signature.empty()) verifyCall(s.signature);
      std::vector<Steps*> one{&s};
      runSteps(one);
      if (onDevice) device_->after(w, s.tensors, fence.device);
    } catch (const c10::ValueError&) {
      throw;  // bad input, refused here: the communicator is as it was (see failed_)
    } catch (...) {
      std::lock_guard<std::mutex> lock(stateMutex_);
      failed_ = true;
      throw;
    }
  };
  if (!async) {
    CallQueue::Body b = std::move(body);
    if (!queue_->runNow(b, work)) {
      queue_->submit(std::move(b), work, false);
      queue_->drive(w, CallQueue::Clock::time_point::max());
    }
    return work;
  }
  queue_->submit(std::move(body), work, true);
  return work;
}

void TesseraBackend::startCoalescing() {
  if (coalescing_)
    throwResult(tsrInvalidUsage,
                "startCoalescing: a coalescing batch is already open on this process group");
  coalescing_ = true;
  batch_.clear();
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::endCoalescing() {
  if (!coalescing_)
    throwResult(tsrInvalidUsage,
                "endCoalescing: no coalescing batch is open on this process group");
  coalescing_ = false;
  std::vector<Recorded> batch = std::move(batch_);
  batch_.clear();
  // The batch runs where its device calls are (all on one device, as with NCCL) or on the host.
  at::Tensor device;
  std::vector<at::Tensor> outputs;
  for (Recorded& r : batch) {
    for (const at::Tensor& t : r.work->result()) outputs.push_back(t);
    for (const at::Tensor& t : r.steps.tensors)
      if (t.is_cuda()) device = t;
    for (const P2POp& op : r.steps.p2p)
      if (op.tensor.is_cuda()) device = op.tensor;
  }
  // One job: the recorded calls' steps together (their tessera calls in one group).
  auto steps = std::make_shared<std::vector<Recorded>>(std::move(batch));
  auto ptrs = std::make_shared<std::vector<Steps*>>();
  std::vector<at::Tensor> tensors;
  for (Recorded& r : *steps) {
    ptrs->push_back(&r.steps);
    tensors.insert(tensors.end(), r.steps.tensors.begin(), r.steps.tensors.end());
  }
  const bool onDevice = device.defined();
  std::vector<c10::Device> devices;
  if (onDevice) devices.push_back(device.device());
  auto work = c10::make_intrusive<TesseraWork>(queue_, rank_, c10d::OpType::COALESCED,
                                               "tessera:coalesced", outputs, devices, timeout_);
  for (Recorded& r : *steps) work->linked.push_back(r.work);
  // An empty batch is done (torch's abort of every group closes one around the aborts); on a
  // group that was aborted or shut down the batch's calls fail, at wait().
  if (steps->empty()) {
    work->complete(nullptr);
    return work;
  }
  if (closed_) {
    work->complete(resultException(tsrInvalidUsage,
                                   "endCoalescing: this process group was aborted or shut down"));
    return work;
  }
  ++calls_;
  Fence fence;
  if (onDevice) fence = device_->capture(device.get_device());
  TesseraWork* w = work.get();
  auto body = [this, steps, ptrs, fence, w, onDevice, tensors]() {
    try {
      std::shared_ptr<void> onStream;
      if (onDevice) onStream = device_->before(fence);
      runSteps(*ptrs);
      if (onDevice) device_->after(w, tensors, fence.device);
    } catch (const c10::ValueError&) {
      throw;  // bad input, refused here: the communicator is as it was (see failed_)
    } catch (...) {
      std::lock_guard<std::mutex> lock(stateMutex_);
      failed_ = true;
      throw;
    }
  };
  queue_->submit(std::move(body), work, /*wake=*/true);
  return work;
}

c10::intrusive_ptr<TesseraBackend> TesseraBackend::splitColor(int color, int key, int childSize,
                                                              std::chrono::milliseconds timeout,
                                                              const std::string& groupName) {
  checkOpen("split");
  // Collective over this group's communicator: in issue order with its other calls.
  tsrComm_t child = nullptr, childP2P = nullptr;
  int childRank = -1, childCount = 0;
  auto work = c10::make_intrusive<TesseraWork>(queue_, rank_, c10d::OpType::UNKNOWN,
                                               "tessera:split", std::vector<at::Tensor>{},
                                               std::vector<c10::Device>{}, timeout_);
  auto body = [&] {
    tsrConfig_t cfg = hostConfig(timeout);
    check(tsrCommSplit(comm_, color, key, &child, &cfg), "tsrCommSplit");
    if (child == nullptr) return;
    check(tsrCommUserRank(child, &childRank), "tsrCommUserRank");
    check(tsrCommCount(child, &childCount), "tsrCommCount");
    check(tsrCommSplit(child, 0, childRank, &childP2P, nullptr), "tsrCommSplit (send/recv)");
  };
  queue_->submit(body, work, /*wake=*/false);
  // The job reads this frame: wait for it whatever it takes (its calls have their deadlines).
  queue_->drive(work.get(), CallQueue::Clock::time_point::max());
  if (std::exception_ptr e = work->exception()) std::rethrow_exception(e);
  if (child == nullptr) return {};
  if (childSize >= 0 && childCount != childSize) {
    tsrCommDestroy(childP2P);
    tsrCommDestroy(child);
    throwResult(tsrInternalError, "split: the new group has " + std::to_string(childCount) +
                                      " ranks, but torch expects " + std::to_string(childSize));
  }
  return c10::make_intrusive<TesseraBackend>(child, childP2P, childRank, childCount, timeout,
                                             groupName, store_);
}

c10::intrusive_ptr<c10d::Backend> TesseraBackend::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  // torch splits each device type's backend of a group, and this one backend serves both cpu and
  // cuda: the second call for the same new group returns what the first made (a split is
  // collective, so every rank must make it once, members and others alike).
  const std::string name = opts ? opts->group_name : std::string();
  if (!name.empty()) {
    auto done = splits_.find(name);
    if (done != splits_.end()) return done->second;
  }
  auto pos = std::find(ranks.begin(), ranks.end(), rank_);
  // Groups of one split are disjoint, so the lowest rank names a group; a rank keeps the place
  // torch gave it in `ranks`.
  const int color =
      pos == ranks.end() ? TSR_SPLIT_NOCOLOR : *std::min_element(ranks.begin(), ranks.end());
  const int key = static_cast<int>(pos - ranks.begin());
  const auto timeout = opts ? opts->timeout : timeout_;
  auto child = splitColor(
      color, key, color == TSR_SPLIT_NOCOLOR ? -1 : static_cast<int>(ranks.size()), timeout, name);
  if (!name.empty()) splits_[name] = child;
  if (!child) return {};
  if (store) child->store_ = store;
  if (opts) {
    child->options_->group_desc = opts->group_desc;
    child->options_->global_ranks_in_group = opts->global_ranks_in_group;
  }
  return child;
}

void TesseraBackend::abort() {
  {
    std::lock_guard<std::mutex> lock(stateMutex_);
    if (closed_) return;
    closed_ = true;
    failed_ = true;
  }
  // tessera's waits give up at once (a call running on the queue returns its error), then the
  // calls still queued fail without running.
  // The handles stay as they are: a call running now gets tessera's error from them (a handle
  // is an id, dead after abort, never a dangling pointer).
  device_->abortAll();
  tsrCommAbort(p2pComm_);
  tsrCommAbort(comm_);
  queue_->close(resultException(tsrRemoteError, "the process group was aborted"));
  queue_->stop();
}

void TesseraBackend::shutdown() {
  {
    std::lock_guard<std::mutex> lock(stateMutex_);
    if (closed_) return;
    closed_ = true;
  }
  // The calls made before shutdown run first (each within its deadline).
  queue_->drain();
  queue_->stop();
  bool orderly;
  {
    std::lock_guard<std::mutex> lock(stateMutex_);
    orderly = !failed_;
  }
  device_->destroyAll(orderly);
  for (tsrComm_t* c : {&p2pComm_, &comm_}) {
    if (*c == nullptr) continue;
    // Finalize waits for every rank, so no rank tears down what a peer still reads; after a
    // failure a peer may be gone, so the end is local.
    if (orderly && tsrCommFinalize(*c) != tsrSuccess) orderly = false;
    tsrCommDestroy(*c);
    *c = nullptr;
  }
  queue_->close(resultException(tsrInvalidUsage, "the process group was shut down"));
}

}  // namespace tessera_torch
