#include "comm/group.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "collectives/plan/plan.hpp"
#include "comm/comm_impl.hpp"
#include "core/datatype.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

struct GroupState {
  int depth = 0;
  Result error = tsrSuccess;  // the first failed call of the open group
  std::string errorText;
  std::vector<PendingCall> calls;
};
thread_local GroupState tGroup;

// The calls of one communicator in a batch, and what starting them gave.
struct CommBatch {
  std::shared_ptr<CommImpl> comm;
  std::vector<const PendingCall*> colls;
  std::vector<P2PCall> p2p;     // host buffers
  std::vector<P2PCall> devP2p;  // device buffers, all on devStream
  void* devStream = nullptr;
  std::vector<std::unique_ptr<Operation>> ops;
  Result result = tsrSuccess;
  std::string error;  // the sentence of a failed start (it may happen on another thread)
};

// Sends and receives whose peer is this rank, with nothing else of the communicator in the group:
// copied, the k-th send into the k-th receive, without the engine (host buffers) or before it is
// made (device buffers: copies on the group's stream; once the engine is made, it does the same
// without its device executor until a device call makes that). Making the engine is collective
// (its transports agree on an id), and a rank whose only calls are to itself must not start it
// alone: its peers may have nothing in this group (a rank calls only what concerns it, NCCL's
// rule; a send of 0 elements is no call at all).
bool selfOnly(const CommBatch& b) {
  if (!b.colls.empty() || b.p2p.empty() == b.devP2p.empty()) return false;
  const int rank = b.comm->rank();
  if (!b.devP2p.empty()) return !b.comm->engineMade() && allToSelf(rank, b.devP2p);
  return allToSelf(rank, b.p2p);
}

Result copyToSelf(const CommBatch& b) {
  if (!b.devP2p.empty()) return copyToSelfOnStream(b.comm->rank(), b.devP2p, b.devStream, false, 0);
  std::vector<const P2PCall*> sends, recvs;
  TSR_CHECK(pairCallsToSelf(b.comm->rank(), b.comm->nranks(), b.p2p, &sends, &recvs));
  for (size_t i = 0; i < sends.size(); ++i)
    if (sends[i]->sendbuf != recvs[i]->recvbuf)
      std::memmove(recvs[i]->recvbuf, sends[i]->sendbuf,
                   sends[i]->count * dtypeSize(sends[i]->dtype));
  return tsrSuccess;
}

// Starts one communicator's calls; the engine's one-time setup of a plan may block on peers.
Result startBatch(CommBatch& b) {
  if (selfOnly(b)) return copyToSelf(b);
  CollectiveEngine* engine = nullptr;
  TSR_CHECK(b.comm->collectives(&engine));
  for (const PendingCall* c : b.colls) {
    // In call order, device and host alike: the engine numbers its calls in that order, and the
    // ranks match calls by it.
    if (c->onDevice) {
      TSR_CHECK(engine->enqueue(c->coll, c->stream));
      continue;
    }
    std::unique_ptr<Operation> op;
    TSR_CHECK(engine->start(c->coll, &op));
    b.ops.push_back(std::move(op));
  }
  // The sends and receives after the collectives, wherever they were in the group: ranks need
  // not agree on where (NCCL's rule), but they must start their setups in the same order.
  if (!b.p2p.empty()) {
    std::unique_ptr<Operation> op;
    TSR_CHECK(engine->startP2P(b.p2p, &op));
    b.ops.push_back(std::move(op));
  }
  // The device ones last (every rank in this same order, so their link setups, pairwise, meet):
  // enqueued, they complete on their stream.
  if (!b.devP2p.empty()) TSR_CHECK(engine->enqueueP2P(b.devP2p, b.devStream));
  return tsrSuccess;
}

// startBatch on any thread: what the standard library throws becomes the batch's error.
void startBatchCatching(CommBatch& b) noexcept {
  ScopedRank scoped(b.comm->rank());
  try {
    b.result = startBatch(b);
  } catch (const std::bad_alloc&) {
    b.result = TSR_FAIL(tsrSystemError, "out of memory while starting a collective");
  } catch (const std::exception& e) {
    b.result =
        TSR_FAIL(tsrInternalError, "starting a collective: unexpected exception: %s", e.what());
  } catch (...) {
    b.result = TSR_FAIL(tsrInternalError, "starting a collective: unexpected exception");
  }
  if (b.result != tsrSuccess) b.error = lastErrorMessage();
}

Result runCallsOnce(std::vector<PendingCall>& calls);

// A fault revokes the communicators of the failed calls (every communicator of a failed group:
// a group is one unit, and a rank that left it half done leaves its peers waiting); on a revoked
// communicator the error names the revocation (CommImpl::callFailed).
Result runCalls(std::vector<PendingCall>& calls) {
  Result r = runCallsOnce(calls);
  if (r == tsrSuccess) return r;
  std::vector<CommImpl*> seen;
  Result out = r;
  for (PendingCall& c : calls) {
    if (std::find(seen.begin(), seen.end(), c.comm.get()) != seen.end()) continue;
    seen.push_back(c.comm.get());
    Result x = c.comm->callFailed(r, "tsrGroupEnd");
    if (x != r) out = x;
  }
  return out;
}

Result runCallsOnce(std::vector<PendingCall>& calls) {
  std::vector<CommBatch> batches;
  for (PendingCall& c : calls) {
    auto it = std::find_if(batches.begin(), batches.end(),
                           [&](const CommBatch& b) { return b.comm == c.comm; });
    if (it == batches.end()) {
      batches.emplace_back();
      batches.back().comm = c.comm;
      it = batches.end() - 1;
    }
    if (!c.isP2P) {
      it->colls.push_back(&c);
    } else if (!c.onDevice) {
      it->p2p.push_back(c.p2p);
    } else {
      // One item runs the group's device sends and receives, so it is ordered on one stream.
      if (!it->devP2p.empty() && c.stream != it->devStream)
        return TSR_FAIL(tsrInvalidUsage,
                        "tsrGroupEnd: rank %d's sends and receives on device buffers in this group "
                        "use two streams (%p and %p); a group's device sends and receives of one "
                        "communicator must use one stream",
                        c.comm->rank(), it->devStream, c.stream);
      it->devStream = c.stream;
      it->devP2p.push_back(c.p2p);
    }
  }
  // Every communicator of the group is busy until its operations are done (tsrCommFinalize
  // waits for them).
  std::vector<CommImpl::WorkScope> work(batches.size());
  for (size_t i = 0; i < batches.size(); ++i)
    TSR_CHECK(work[i].enter(batches[i].comm.get(), "tsrGroupEnd"));
  if (batches.size() == 1) {
    startBatchCatching(batches[0]);
    if (batches[0].result != tsrSuccess) return batches[0].result;  // this thread's error already
  } else {
    // One thread drives ranks of several communicators (or several ranks of one, as after
    // tsrCommInitAll): a start may wait for the same call on another of them, so they start
    // concurrently.
    std::vector<std::thread> threads;
    threads.reserve(batches.size());
    try {
      for (CommBatch& b : batches) threads.emplace_back([&b] { startBatchCatching(b); });
    } catch (...) {
      for (std::thread& t : threads) t.join();
      throw;  // guarded() turns it into tsrSystemError
    }
    for (std::thread& t : threads) t.join();
    for (const CommBatch& b : batches)
      if (b.result != tsrSuccess)
        return TSR_FAIL(b.result, "tsrGroupEnd: starting the calls of rank %d failed: %s",
                        b.comm->rank(), b.error.c_str());
  }
  std::vector<Operation*> ops;
  double timeout = 0;
  for (CommBatch& b : batches) {
    for (auto& op : b.ops) ops.push_back(op.get());
    timeout = std::max(timeout, b.comm->callTimeoutSeconds());
  }
  if (ops.empty()) return tsrSuccess;  // device calls only: enqueued, they complete on streams
  ScopedRank scoped(batches.size() == 1 ? batches[0].comm->rank() : currentRank());
  return runOperations(ops, timeout);
}

// The outermost group ends: its calls move to *calls and a later group starts empty, whatever
// happens next. A call that failed its checks fails the end, and then nothing of the group runs.
Result closeGroup(const char* api, std::vector<PendingCall>* calls) {
  *calls = std::move(tGroup.calls);
  tGroup.calls.clear();
  Result error = tGroup.error;
  std::string errorText = std::move(tGroup.errorText);
  tGroup.error = tsrSuccess;
  tGroup.errorText.clear();
  if (error != tsrSuccess)
    return TSR_FAIL(error,
                    "%s: nothing of the group was started because one of its calls failed: %s", api,
                    errorText.c_str());
  return tsrSuccess;
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

bool groupHasCallsOf(const CommImpl* comm) {
  return std::any_of(tGroup.calls.begin(), tGroup.calls.end(),
                     [comm](const PendingCall& c) { return c.comm.get() == comm; });
}

Result submitCall(PendingCall call) {
  if (tGroup.depth > 0) {
    tGroup.calls.push_back(std::move(call));
    return tsrSuccess;
  }
  if (!call.isP2P || call.onDevice) {
    // The common case, one collective outside a group, without the batching containers: it is
    // most of a small call's host overhead. A send or receive on device buffers is enqueued.
    CommImpl* comm = call.comm.get();
    auto once = [&]() -> Result {
      CommImpl::WorkScope work;
      TSR_CHECK(work.enter(comm, "the call"));
      CollectiveEngine* engine = nullptr;
      TSR_CHECK(comm->collectives(&engine));
      if (call.isP2P) return engine->enqueueP2P({call.p2p}, call.stream);
      if (call.onDevice) return engine->enqueue(call.coll, call.stream);
      std::unique_ptr<Operation> op;
      TSR_CHECK(engine->start(call.coll, &op));
      return runOperation(op.get(), comm->callTimeoutSeconds());
    };
    Result r = once();
    if (r == tsrSuccess) return r;
    return comm->callFailed(r, call.isP2P ? (call.p2p.isSend ? "tsrSend" : "tsrRecv")
                                          : collectiveName(call.coll.collective));
  }
  std::vector<PendingCall> one;
  one.push_back(std::move(call));
  return runCalls(one);
}

Result noteCallError(Result code) {
  if (code != tsrSuccess && tGroup.depth > 0 && tGroup.error == tsrSuccess) {
    tGroup.error = code;
    tGroup.errorText = lastErrorMessage();
  }
  return code;
}

Result groupStart() {
  ++tGroup.depth;
  return tsrSuccess;
}

Result groupEnd() {
  if (tGroup.depth == 0)
    return TSR_FAIL(tsrInvalidUsage, "tsrGroupEnd: no tsrGroupStart is open on this thread");
  if (--tGroup.depth > 0) return tsrSuccess;
  std::vector<PendingCall> calls;
  TSR_CHECK(closeGroup("tsrGroupEnd", &calls));
  if (calls.empty()) return tsrSuccess;
  return runCalls(calls);
}

Result groupSimulateEnd(double* estimatedUs) {
  if (estimatedUs == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "tsrGroupSimulateEnd: estimatedTimeUs is NULL");
  if (tGroup.depth == 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "tsrGroupSimulateEnd: no tsrGroupStart is open on this thread");
  if (tGroup.depth > 1)
    return TSR_FAIL(tsrInvalidUsage,
                    "tsrGroupSimulateEnd: it ends the outermost group only (%d groups are open: "
                    "close the inner ones with tsrGroupEnd)",
                    tGroup.depth);
  // None of the group's calls runs.
  tGroup.depth = 0;
  std::vector<PendingCall> calls;
  TSR_CHECK(closeGroup("tsrGroupSimulateEnd", &calls));
  // A communicator's collectives run one after another; its sends and receives together (the
  // slowest counts); different communicators at the same time (the slowest counts).
  struct PerComm {
    CommImpl* comm;
    double colls = 0, p2p = 0;
  };
  std::vector<PerComm> per;
  for (const PendingCall& c : calls) {
    auto it = std::find_if(per.begin(), per.end(),
                           [&](const PerComm& p) { return p.comm == c.comm.get(); });
    if (it == per.end()) it = per.insert(per.end(), PerComm{c.comm.get()});
    CollectiveEngine* engine = nullptr;
    TSR_CHECK(c.comm->collectives(&engine));
    double us = 0;
    if (c.isP2P) {
      TSR_CHECK(engine->predictP2PUs(c.p2p, &us));
      it->p2p = std::max(it->p2p, us);
    } else {
      TSR_CHECK(engine->predictUs(c.coll, c.onDevice, &us));
      it->colls += us;
    }
  }
  double total = 0;
  for (const PerComm& p : per) total = std::max(total, p.colls + p.p2p);
  *estimatedUs = total;
  return tsrSuccess;
}

}  // namespace tessera
