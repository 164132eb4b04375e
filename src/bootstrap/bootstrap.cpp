// The checks every kind shares: arguments, the abort state, the deadline, one operation at a
// time per instance.
#include "bootstrap/bootstrap.hpp"

#include <climits>

#include "core/env.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;
}  // namespace

Result resolveBootstrapTimeout(const BootstrapOptions& options, double* seconds) {
  if (options.timeoutSeconds > 0) {
    *seconds = options.timeoutSeconds;
    return tsrSuccess;
  }
  return envDouble("TESSERA_BOOTSTRAP_TIMEOUT", seconds);
}

std::string Bootstrap::secondsText(double seconds) { return strprintf("%g s", seconds); }

Result Bootstrap::fail(Result code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vstrprintf(fmt, ap);
  va_end(ap);
  return failWith(kLogSubsys, code, "%s bootstrap, rank %d of %d: %s", kind(), rank_, nranks_,
                  msg.c_str());
}

Result Bootstrap::interrupted(const char* operation) {
  return fail(tsrRemoteError, "%s was interrupted because the bootstrap was aborted", operation);
}

Result Bootstrap::checkUsable(const char* operation) {
  if (aborted())
    return fail(tsrInvalidUsage, "%s called after the bootstrap was aborted", operation);
  return tsrSuccess;
}

Result Bootstrap::lockOps(std::unique_lock<TimedMutex>* lock, const Deadline& deadline,
                          const char* operation) {
  *lock = std::unique_lock<TimedMutex>(opMutex_, std::defer_lock);
  if (!lock->try_lock_until(deadline.at()))
    return fail(tsrTimeout,
                "%s waited %s for another thread's operation on this bootstrap to finish",
                operation, secondsText(timeoutSeconds_).c_str());
  return checkUsable(operation);
}

BootstrapOptions Bootstrap::childOptions() const {
  BootstrapOptions o;
  o.timeoutSeconds = timeoutSeconds_;
  return o;
}

Result Bootstrap::allGather(void* data, size_t bytesPerRank) {
  TSR_CHECK(checkUsable("allGather"));
  if (data == nullptr && bytesPerRank > 0)
    return fail(tsrInvalidArgument, "allGather of %zu bytes per rank with a null buffer",
                bytesPerRank);
  if (bytesPerRank > SIZE_MAX / static_cast<size_t>(nranks_))
    return fail(tsrInvalidArgument, "allGather of %zu bytes per rank overflows the buffer size",
                bytesPerRank);
  Deadline deadline = Deadline::after(timeoutSeconds_);
  std::unique_lock<TimedMutex> lock;
  TSR_CHECK(lockOps(&lock, deadline, "allGather"));
  return doAllGather(data, bytesPerRank, deadline);
}

namespace {
const char* checkPointToPoint(int peer, int nranks, int tag, const void* data, size_t bytes,
                              std::string* why) {
  if (peer < 0 || peer >= nranks)
    *why = strprintf("peer %d is out of range (there are %d ranks)", peer, nranks);
  else if (tag < 0)
    *why = strprintf("tag %d is negative (negative tags are reserved for the bootstrap)", tag);
  else if (data == nullptr && bytes > 0)
    *why = strprintf("the buffer of %zu bytes is null", bytes);
  return why->empty() ? nullptr : why->c_str();
}
}  // namespace

Result Bootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  TSR_CHECK(checkUsable("send"));
  std::string why;
  if (checkPointToPoint(peer, nranks_, tag, data, bytes, &why) != nullptr)
    return fail(tsrInvalidArgument, "send to rank %d with tag %d: %s", peer, tag, why.c_str());
  Deadline deadline = Deadline::after(timeoutSeconds_);
  std::unique_lock<TimedMutex> lock;
  TSR_CHECK(lockOps(&lock, deadline, "send"));
  return doSend(peer, tag, data, bytes, deadline);
}

Result Bootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  TSR_CHECK(checkUsable("recv"));
  std::string why;
  if (checkPointToPoint(peer, nranks_, tag, data, bytes, &why) != nullptr)
    return fail(tsrInvalidArgument, "recv from rank %d with tag %d: %s", peer, tag, why.c_str());
  Deadline deadline = Deadline::after(timeoutSeconds_);
  std::unique_lock<TimedMutex> lock;
  TSR_CHECK(lockOps(&lock, deadline, "recv"));
  return doRecv(peer, tag, data, bytes, deadline);
}

Result Bootstrap::barrier() {
  TSR_CHECK(checkUsable("barrier"));
  Deadline deadline = Deadline::after(timeoutSeconds_);
  std::unique_lock<TimedMutex> lock;
  TSR_CHECK(lockOps(&lock, deadline, "barrier"));
  return doBarrier(deadline);
}

Result Bootstrap::broadcast(void* data, size_t bytes, int root) {
  TSR_CHECK(checkUsable("broadcast"));
  if (root < 0 || root >= nranks_)
    return fail(tsrInvalidArgument, "broadcast from root %d: out of range (there are %d ranks)",
                root, nranks_);
  if (data == nullptr && bytes > 0)
    return fail(tsrInvalidArgument, "broadcast of %zu bytes with a null buffer", bytes);
  Deadline deadline = Deadline::after(timeoutSeconds_);
  std::unique_lock<TimedMutex> lock;
  TSR_CHECK(lockOps(&lock, deadline, "broadcast"));
  return doBroadcast(data, bytes, root, deadline);
}

Result Bootstrap::split(int color, int key, std::unique_ptr<Bootstrap>* child) {
  TSR_CHECK(checkUsable("split"));
  if (child == nullptr) return fail(tsrInvalidArgument, "split with a null child pointer");
  child->reset();
  if (color < 0 && color != TSR_SPLIT_NOCOLOR)
    return fail(tsrInvalidArgument,
                "split with color %d: a color is >= 0 or TSR_SPLIT_NOCOLOR (%d)", color,
                TSR_SPLIT_NOCOLOR);
  // No operation lock here: the split is made of this instance's own collectives.
  return doSplit(color, key, child);
}

void Bootstrap::abort() {
  if (aborted_.exchange(true, std::memory_order_acq_rel)) return;
  doAbort();
}

}  // namespace tessera
