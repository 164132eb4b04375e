// runOperations (engine.hpp): one thread drives a set of operations, which may belong to
// several communicators, round-robin until all are done.
#include "collectives/exec/engine_impl.hpp"
#include "tessera/device/atomics.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr size_t kInline = 16;  // most calls drive one operation: no allocation for those
}  // namespace

namespace {

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
  for (uint32_t iter = 0; left > 0;) {
    uint64_t before = tlsExecMoves;
    bool moved = false;
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      bool fin = false;
      TSR_CHECK(ops[i]->progress(&fin));
      if (fin) {
        done[i] = true;
        --left;
        moved = true;
      }
    }
    if (moved || left == 0 || tlsExecMoves != before) {
      iter = 0;
      continue;
    }
    if ((iter & 63) == 63 && deadline.expired()) {
      std::string pending;
      for (size_t i = 0; i < n; ++i) {
        if (done[i]) continue;
        auto* x = dynamic_cast<ExecOperation*>(ops[i]);
        pending +=
            (pending.empty() ? "" : "; ") + (x != nullptr ? x->blocked() : ops[i]->describe());
      }
      return TSR_FAIL(tsrTimeout, "%zu of %zu operations still pending after %.3g s: %s", left, n,
                      timeoutSeconds, pending.c_str());
    }
    device::backoff(iter++);
  }
  return tsrSuccess;
}

}  // namespace

Result runOperations(const std::vector<Operation*>& ops, double timeoutSeconds) {
  return runAll(ops.data(), ops.size(), timeoutSeconds);
}

Result runOperation(Operation* op, double timeoutSeconds) { return runAll(&op, 1, timeoutSeconds); }

}  // namespace tessera
