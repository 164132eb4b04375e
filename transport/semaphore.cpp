#include "transport/semaphore.hpp"

#include "core/park.hpp"
#include "transport/context_state.hpp"
#include "transport/cuda_ipc/cuda_memory.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTransport;

// The host reads and writes its own counters directly, except in device memory.
Result loadWord(const Memory& m, const uint64_t* p, uint64_t* v) {
  if (m.kind() == MemoryKind::kCuda) return cudaReadWord(p, v);
  *v = device::loadAcquire(p);
  return tsrSuccess;
}

Result storeWord(const Memory& m, uint64_t* p, uint64_t v) {
  if (m.kind() == MemoryKind::kCuda) return cudaWriteWord(p, v);
  device::storeRelaxed(p, v);
  return tsrSuccess;
}
}  // namespace

Semaphore::Semaphore(uint32_t id, std::shared_ptr<Connection> connection,
                     std::shared_ptr<Memory> local, size_t localOffset,
                     std::shared_ptr<RemoteMemory> remote, size_t remoteOffset)
    : id_(id),
      connection_(std::move(connection)),
      local_(std::move(local)),
      localOffset_(localOffset),
      remote_(std::move(remote)),
      remoteOffset_(remoteOffset) {
  TransportKind k = connection_->kind();
  parkable_ = local_->kind() == MemoryKind::kHost &&
              (k == TransportKind::kInproc || k == TransportKind::kShm);
}

Result Semaphore::signal() {
  TSR_CHECK(connection_->atomicAdd(*remote_, remoteOffset_ + kInboundOffset, 1));
  // The add was sequentially consistent (HostMappedConnection::doAtomicAdd); a peer that parked
  // on its counter raised the flag next to it.
  if (char* block = remoteBlock(); parkable_ && block != nullptr)
    device::hostWakeParked(reinterpret_cast<uint64_t*>(block + kInboundOffset),
                           reinterpret_cast<uint32_t*>(block + kParkedOffset));
  return tsrSuccess;
}

bool Semaphore::parkable(const uint32_t** word, uint32_t** parked) const {
  if (!parkable_) return false;
  uint64_t* counter = localWord(kInboundOffset);
  *word = device::counterFutexWord(counter);
  *parked = device::counterParkedFlag(counter);
  return true;
}

uint64_t Semaphore::received() const {
  uint64_t v = 0;
  (void)loadWord(*local_, localWord(kInboundOffset), &v);
  return v;
}

uint64_t Semaphore::consumed() const {
  uint64_t v = 0;
  (void)loadWord(*local_, localWord(kExpectedOffset), &v);
  return v;
}

bool Semaphore::poll() {
  uint64_t have = 0, used = 0;
  if (loadWord(*local_, localWord(kInboundOffset), &have) != tsrSuccess ||
      loadWord(*local_, localWord(kExpectedOffset), &used) != tsrSuccess || have <= used)
    return false;
  return storeWord(*local_, localWord(kExpectedOffset), used + 1) == tsrSuccess;
}

Result Semaphore::wait(double timeoutSeconds) {
  const ContextState& ctx = *local_->context();
  double seconds = timeoutSeconds > 0 ? timeoutSeconds : ctx.timeoutSeconds;
  Deadline deadline = Deadline::after(seconds);
  uint64_t used = 0, have = 0;
  TSR_CHECK(loadWord(*local_, localWord(kExpectedOffset), &used));
  uint64_t want = used + 1;
  auto lastCheck = Clock::now();
  HostWaiter waiter;
  ParkSet park;
  if (waitSettings().park) (void)addParkWord(&park);
  for (uint32_t iter = 0;; ++iter) {
    TSR_CHECK(loadWord(*local_, localWord(kInboundOffset), &have));
    if (have >= want) return storeWord(*local_, localWord(kExpectedOffset), want);
    connection_->progress();
    if ((iter & 31) != 31) {
      if (waiter.idle() == WaitStep::kPoll) continue;
      if (park.empty()) {
        waiter.nap();
        continue;
      }
      park.arm();
      TSR_CHECK(loadWord(*local_, localWord(kInboundOffset), &have));
      if (have >= want) {
        park.disarm();
        continue;
      }
      park.sleep(parkSliceNs(deadline));
      // Then the checks below, as after every 32 polls.
    }
    if (ctx.aborted.load(std::memory_order_acquire))
      return TSR_FAIL(tsrRemoteError,
                      "rank %d: wait on semaphore %u from peer %d interrupted: the communicator "
                      "was aborted",
                      ctx.rank, id_, peer());
    if (!ctx.alive.load(std::memory_order_acquire))
      return TSR_FAIL(tsrInvalidArgument,
                      "rank %d: wait on semaphore %u of a destroyed communicator", ctx.rank, id_);
    auto now = Clock::now();
    if (now - lastCheck > std::chrono::milliseconds(20)) {
      lastCheck = now;
      Result r = connection_->peerStatus();
      if (r != tsrSuccess)
        return addContext(r, "rank %d: wait on semaphore %u from peer %d (signal %llu)", ctx.rank,
                          id_, peer(), static_cast<unsigned long long>(want));
    }
    if (deadline.expired())
      return TSR_FAIL(tsrTimeout,
                      "rank %d: waited %.3g s on semaphore %u for signal %llu from peer %d over "
                      "%s; %llu arrived",
                      ctx.rank, seconds, id_, static_cast<unsigned long long>(want), peer(),
                      transportName(connection_->kind()), static_cast<unsigned long long>(have));
  }
}

bool Semaphore::addParkWord(ParkSet* set) const {
  const uint32_t* word = nullptr;
  uint32_t* parked = nullptr;
  return parkable(&word, &parked) && set->add(word, parked);
}

device::SemaphoreDeviceHandle Semaphore::deviceHandle() const {
  device::SemaphoreDeviceHandle h{};
  h.inbound = localWord(kInboundOffset);
  h.expected = localWord(kExpectedOffset);
  char* block = remoteBlock();
  h.remoteInbound = block ? reinterpret_cast<uint64_t*>(block + kInboundOffset) : nullptr;
  h.remoteParked =
      parkable_ && block ? reinterpret_cast<uint32_t*>(block + kParkedOffset) : nullptr;
  return h;
}

}  // namespace tessera
