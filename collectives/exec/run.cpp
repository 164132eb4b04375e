// runOperations (engine.hpp): one thread drives a set of operations, which may belong to
// several communicators, round-robin until all are done.
#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/pending_dump.hpp"
#include "core/park.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr size_t kInline = 16;  // most calls drive one operation: no allocation for those
}  // namespace

namespace {

// What every pending operation waits for, "; "-separated.
std::string pendingText(Operation* const* ops, const bool* done, size_t n) {
  std::string pending;
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    auto* x = dynamic_cast<ExecOperation*>(ops[i]);
    pending += (pending.empty() ? "" : "; ") + (x != nullptr ? x->blocked() : ops[i]->describe());
  }
  return pending;
}

// TESSERA_DUMP_ON_TIMEOUT at a timeout: the same host's peers of every pending operation.
void signalPeersOf(Operation* const* ops, const bool* done, size_t n) {
  std::vector<int> pids;
  for (size_t i = 0; i < n; ++i) {
    auto* x = done[i] ? nullptr : dynamic_cast<ExecOperation*>(ops[i]);
    const std::vector<int>* p = x != nullptr ? x->dumpPeers() : nullptr;
    if (p != nullptr) pids.insert(pids.end(), p->begin(), p->end());
  }
  int sent = signalDumpPeers(pids);
  if (sent > 0)
    TSR_WARN("TESSERA_DUMP_ON_TIMEOUT: asked %d process(es) of this host to log what they wait for",
             sent);
}

// Lowers the flags of an armed park on every way out.
struct ParkGuard {
  ParkSet& set;
  bool armed = false;
  ~ParkGuard() {
    if (armed) set.disarm();
  }
};

Result runAll(Operation* const* ops, size_t n, double timeoutSeconds) {
  bool inlineDone[kInline];
  bool* done = inlineDone;
  std::unique_ptr<bool[]> doneHeap;
  if (n > kInline) {
    doneHeap = std::make_unique<bool[]>(n);
    done = doneHeap.get();
  }
  for (size_t i = 0; i < n; ++i) {
    if (ops[i] == nullptr)
      return TSR_FAIL(tsrInvalidArgument, "runOperations: operation %zu is null", i);
    done[i] = false;
  }
  size_t left = n;
  Deadline deadline = Deadline::after(timeoutSeconds);
  uint64_t dumpSeen = dumpGeneration();
  HostWaiter waiter;
  ParkSet park;
  ParkGuard guard{park};
  for (uint32_t iter = 0; left > 0;) {
    uint64_t before = tlsExecMoves;
    bool moved = false;
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      bool fin = false;
      if (Result r = ops[i]->progress(&fin); r != tsrSuccess) {
        // A dump asked for just before the call failed (a revocation that followed a peer's
        // timeout, say) is still logged: it says what this rank was waiting for.
        if (dumpGeneration() != dumpSeen)
          TSR_WARN("TESSERA_DUMP_ON_TIMEOUT (SIGUSR1): pending: %s",
                   pendingText(ops, done, n).c_str());
        return r;
      }
      if (fin) {
        done[i] = true;
        --left;
        moved = true;
      }
    }
    moved = moved || left == 0 || tlsExecMoves != before;
    bool slept = false;
    if (guard.armed) {
      // The pass after arm(): sleep only if it found nothing either.
      guard.armed = false;
      if (moved) {
        park.disarm();
      } else {
        park.sleep(parkSliceNs(deadline));
        slept = true;
      }
    }
    if (moved) {
      iter = 0;
      waiter.moved();
      continue;
    }
    if (slept || (iter & 63) == 63) {
      if (deadline.expired()) {
        std::string pending = pendingText(ops, done, n);
        if (dumpOnTimeout()) {
          TSR_WARN("TESSERA_DUMP_ON_TIMEOUT: pending after %.3g s: %s", timeoutSeconds,
                   pending.c_str());
          signalPeersOf(ops, done, n);
        }
        return TSR_FAIL(tsrTimeout, "%zu of %zu operations still pending after %.3g s: %s", left, n,
                        timeoutSeconds, pending.c_str());
      }
      if (uint64_t g = dumpGeneration(); g != dumpSeen) {
        dumpSeen = g;
        TSR_WARN("TESSERA_DUMP_ON_TIMEOUT (SIGUSR1): pending: %s",
                 pendingText(ops, done, n).c_str());
      }
    }
    ++iter;
    if (slept || waiter.idle() == WaitStep::kPoll) continue;
    // Park on what every pending operation waits for, or poll on where one cannot say.
    park.clear();
    bool parkable = waitSettings().park;
    for (size_t i = 0; i < n && parkable; ++i)
      if (!done[i]) parkable = ops[i]->parkWords(&park);
    if (!parkable || park.empty()) {
      waiter.nap();
      continue;
    }
    park.arm();
    guard.armed = true;
  }
  return tsrSuccess;
}

}  // namespace

Result runOperations(const std::vector<Operation*>& ops, double timeoutSeconds) {
  return runAll(ops.data(), ops.size(), timeoutSeconds);
}

Result runOperation(Operation* op, double timeoutSeconds) { return runAll(&op, 1, timeoutSeconds); }

}  // namespace tessera
