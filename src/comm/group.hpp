// Groups (tsrGroupStart / tsrGroupEnd) and the issue of validated calls to the engines.
//
// Outside a group a call is started and run to completion on the calling thread. Inside one it is
// queued; the outermost tsrGroupEnd starts every queued call, per communicator in call order
// (the collectives, then one startP2P with all of that communicator's sends and receives), and
// then drives all their operations together, so a group whose calls depend on each other (a send
// and its receive, ranks of one communicator driven by one thread) cannot deadlock.
//
// A collective on device buffers is enqueued on the device executor instead (outside a group at
// once, inside one at tsrGroupEnd in its place among the communicator's collectives): it returns
// once enqueued, and completes in stream order; its errors come later, as the communicator's
// async error. Sends and receives on device buffers likewise: outside a group one at once, inside
// one all of a communicator's together (one enqueueP2P, after its collectives and its host sends
// and receives), on the stream they name (one stream per communicator and group).
#pragma once

#include <memory>
#include <vector>

#include "collectives/exec/engine.hpp"
#include "core/status.hpp"

namespace tessera {

class CommImpl;

// One validated call (count > 0).
struct PendingCall {
  std::shared_ptr<CommImpl> comm;
  bool isP2P = false;
  CollCall coll;  // !isP2P
  P2PCall p2p;    // isP2P
  // Device buffers: the call goes to the engine's device executor, ordered on `stream` (a
  // cudaStream_t; NULL: the legacy default stream).
  bool onDevice = false;
  void* stream = nullptr;
};

// True when the calling thread is inside tsrGroupStart / tsrGroupEnd.
bool inGroup();
// True when the calling thread's open group holds a queued call of `comm`.
bool groupHasCallsOf(const CommImpl* comm);
// Inside a group: queues the call; outside: runs it to completion.
Result submitCall(PendingCall call);
// A call failed its checks: inside a group the error is remembered so that tsrGroupEnd fails
// too (and nothing of the group is started). Returns `code` (tsrSuccess passes through).
Result noteCallError(Result code);

Result groupStart();
Result groupEnd();
// Ends the outermost group without running its calls; *estimatedUs: the tuner's estimate of
// what running them would take (CollectiveEngine::predictUs).
Result groupSimulateEnd(double* estimatedUs);

}  // namespace tessera
