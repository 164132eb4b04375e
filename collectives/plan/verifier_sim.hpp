// The verifier's symbolic simulation (internal to collectives/plan; verifier.hpp is the contract).
//
// Model:
//  - Threads of the happens-before relation: every (rank, worker), plus one "put stream" per
//    (rank, worker, peer) the worker puts to. A put or reduceSend is only issued when its op
//    runs; its remote write (and a put's read of its source) belong to the stream, which the
//    worker joins only at a later signal or flush to that peer. A signal or flush by another
//    worker of the rank covers the puts that happen before it. So a plan that reuses a put's
//    source, or lets a peer read a put's data, before a flush or signal is a race. Puts of one
//    stream are not ordered among themselves either (UCX orders puts only at a fence), so two
//    puts to one remote chunk with no flush or signal to that peer between them race.
//  - A stream's accesses happen when its put is issued, so it needs no clock of its own: it
//    sees what its worker sees at that moment (except its own earlier puts, which it sees only
//    once they completed) and counts its puts. Clocks are kept for workers only, so memory grows
//    with workers x threads, not threads^2.
//  - Vector clocks over those threads. Each op ticks its worker. Signal k of (r -> p, ch)
//    carries the signaller's clock to the wait that consumes it (credits are waits satisfied
//    without a signal, so they carry nothing). The k-th barrier of a rank joins its workers.
//  - Memory: one location per chunk, keyed by (rank, buffer, chunk) and, for input and output,
//    the iteration (user buffers are fresh per iteration; scratch persists). In place, output
//    chunks alias their input chunks. Each location keeps its last write and the reads since
//    (one per thread, FastTrack style); an access unordered with one of them is a race.
//  - Values: a sorted set of (rank, input chunk) contributions, a "raw" flag (the untouched
//    input, before the pre-op) and a "canonical" flag (see verifier_values.hpp).
//  - Peer access to a rank's user buffers (by peers' workers or by any put stream) must happen
//    after that rank started the iteration (its input is ready, its output free) and before it
//    ended the iteration (the caller may reuse the buffers once the call returns).
// One fair interleaving suffices: each semaphore has one signaller and one waiter and barriers
// are counted, so which signal a wait consumes, and hence happens-before, does not depend on the
// interleaving; without races the values do not either.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/plan/plan.hpp"
#include "collectives/plan/verifier.hpp"
#include "collectives/plan/verifier_values.hpp"

namespace tessera::verifier {

// Bounds on one verification, so a huge (or hostile) plan fails cleanly instead of exhausting
// time or memory (verifier.cpp checks them before simulating; the simulation checks the clock
// vectors it makes as it runs).
inline constexpr uint64_t kMaxLocations = uint64_t{1} << 22;   // chunks tracked
inline constexpr uint64_t kMaxWork = uint64_t{1} << 33;        // chunk accesses + clock-entry steps
inline constexpr uint64_t kMaxClockWords = uint64_t{1} << 27;  // 512 MiB of clock entries

struct SimResult {
  VerifyProperty property = VerifyProperty::kOk;
  int rank = -1;
  int worker = -1;
  int op = -1;
  std::string message;  // without the "property:" prefix
};

using Clock = std::vector<uint32_t>;

// A thread's access to a location: its epoch and the op that made it.
struct Access {
  uint32_t thread = 0;
  uint32_t clock = 0;
  uint64_t op = 0;  // packed, see packOp
};

struct Location {
  int32_t value = kUninit;
  bool written = false;
  Access write;
  std::vector<Access> reads;
};

class Simulation {
 public:
  Simulation(const Plan& plan, int iterations, bool inPlace);
  SimResult run();

 private:
  struct WorkerState {
    int rank = 0;
    int index = 0;
    uint32_t thread = 0;
    int iter = 0;
    size_t pc = 0;
    bool done = false;
    bool arrived = false;                           // at its current barrier
    int64_t barriers = 0;                           // barriers passed
    std::vector<std::pair<int, uint32_t>> streams;  // (peer, stream thread)
  };
  struct Stream {
    int rank = 0;
    int worker = 0;
    uint32_t issuer = 0;  // the worker's thread
    uint32_t puts = 0;    // puts issued (the stream's own clock entry)
    // (issuing worker's own clock at the put, the stream's clock after it), per put.
    std::vector<std::pair<uint32_t, uint32_t>> history;
  };
  // A signal's clock without a full copy per signal (ranks that signal all their peers before
  // waiting would hold nranks^2 clocks): a snapshot of the signaller's clock, shared by its
  // signals while few entries moved since, plus those entries, so base + diff is exactly the
  // clock at the signal.
  struct SignalClock {
    std::shared_ptr<const Clock> base;
    std::vector<std::pair<uint32_t, uint32_t>> diff;  // (thread, value)
  };
  struct Semaphore {
    std::deque<SignalClock> pending;  // signals sent, not yet consumed
    int64_t sent = 0;
    int64_t waited = 0;
    int32_t credits = 0;
  };
  struct Barrier {
    int arrived = 0;
    Clock clock;
  };
  struct Foreign {  // a peer's or a stream's access to a rank's user buffer
    int owner = 0;
    int iter = 0;
    BufferKind buffer = BufferKind::kInput;
    int64_t chunk = 0;
    Access access;
    bool isWrite = false;
  };
  enum ErrorKind { kErrRaw, kErrDouble, kErrUninit, kErrOrder, kErrPosition, kErrKinds };

  // Setup.
  void assignThreads();
  void initMemory();
  // Scheduling.
  bool step(WorkerState& w);
  bool startIteration(WorkerState& w);
  bool execute(WorkerState& w, const Op& op, uint64_t opId);
  void dataOp(WorkerState& w, const Op& op, uint64_t opId);
  void completePuts(WorkerState& w, int peer);
  uint32_t streamFor(WorkerState& w, int peer);
  // Memory.
  size_t locate(int owner, BufferKind b, int64_t chunk, int iter) const;
  int32_t readChunk(uint32_t thread, int rank, const ChunkRef& ref, int64_t i, int iter,
                    uint64_t opId);
  void writeChunk(uint32_t thread, int rank, const ChunkRef& ref, int64_t i, int iter,
                  uint64_t opId, int32_t value);
  void checkPeerAccess(uint32_t thread, int owner, BufferKind b, int64_t chunk, int iter,
                       const Access& a, bool isWrite);
  void race(const Access& now, const Access& before, const std::string& what, bool nowWrites,
            bool beforeWrote);
  // The clock a thread's access is ordered by: a worker's own, a stream's worker's (see above).
  const Clock& view(uint32_t thread) const {
    return thread < workers_.size() ? clocks_[thread]
                                    : clocks_[streams_[thread - workers_.size()].issuer];
  }
  uint32_t own(uint32_t thread) const {
    return thread < workers_.size() ? clocks_[thread][thread]
                                    : streams_[thread - workers_.size()].puts;
  }
  bool ordered(uint32_t thread, const Access& before) const {
    return view(thread)[before.thread] >= before.clock;
  }
  // Counts clock entries made while running (pending signals, barriers; a (thread, value) pair
  // counts two); false (and a "too large" result) past kMaxClockWords.
  bool allocClock(const WorkerState& w, uint64_t words);
  // Results.
  SimResult deadlock() const;
  SimResult endRule() const;
  SimResult balance() const;
  SimResult postcondition() const;
  void recordError(ErrorKind kind, uint64_t opId, const std::string& message);
  std::string opText(uint64_t opId) const;
  std::string locText(int owner, BufferKind b, int64_t chunk) const;
  uint64_t semKey(int from, int to, int channel) const {
    return (static_cast<uint64_t>(from) * static_cast<uint64_t>(plan_.nranks) +
            static_cast<uint64_t>(to)) *
               kMaxChannels +
           static_cast<uint64_t>(channel);
  }

  const Plan& plan_;
  int iterations_;
  bool inPlace_;
  int64_t nIn_ = 0, nOut_ = 0;  // chunks of input and output (same on every rank)
  size_t userBlock_ = 0;        // locations per (rank, iteration)
  std::vector<size_t> scratchBase_;
  ValueTable values_;
  std::vector<Location> memory_;
  std::vector<WorkerState> workers_;
  std::vector<std::vector<size_t>> rankWorkers_;  // indices into workers_
  std::vector<Stream> streams_;                   // indexed by thread - workers_.size()
  size_t threads_ = 0;                            // workers + streams
  std::vector<Clock> clocks_;                     // per worker, threads_ entries each
  uint64_t clockWords_ = 0;                       // clock entries allocated
  // Per worker: the snapshot its next signals share (null: none yet); declared after
  // clockWords_, which their deleter updates.
  std::vector<std::shared_ptr<const Clock>> snaps_;
  std::unordered_map<uint64_t, Semaphore> sems_;
  std::vector<std::vector<Barrier>> barriers_;              // per rank, per barrier number
  std::vector<std::vector<Clock>> ends_;                    // per rank, per iteration
  std::vector<std::vector<std::vector<uint32_t>>> starts_;  // [rank][iter][worker]
  std::vector<Foreign> foreign_;
  bool stop_ = false;
  SimResult fatal_;  // a race: stops the simulation
  SimResult errors_[kErrKinds];
};

// (rank, worker, op index, iteration) in one word, for access records.
inline uint64_t packOp(int rank, int worker, size_t op, int iter) {
  return (static_cast<uint64_t>(rank) << 40) | (static_cast<uint64_t>(worker) << 32) |
         (static_cast<uint64_t>(iter) << 24) | static_cast<uint64_t>(op);
}

}  // namespace tessera::verifier
