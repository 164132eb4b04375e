// Bootstrap: exchanges small blobs between the ranks of a communicator before any fast path
// exists (DESIGN.md, "Bootstrap"). Three kinds: inproc (threads of one process), tcp (unique id)
// and mpi (an MPI communicator); all share this interface.
//
// Every operation waits at most timeoutSeconds() and then fails with tsrTimeout and a sentence
// naming this rank, the operation and the peer(s) it waited for. Collectives (allGather, barrier,
// broadcast, split) must be called by every rank in the same order. Operations on one instance
// are serialized (a second thread waits for the first); abort() may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/deadline.hpp"
#include "core/status.hpp"
#include "core/timed_mutex.hpp"

namespace tessera {

// The most ranks a communicator may have. It bounds what a (buggy or hostile) peer can make a
// root or a rank allocate from one number on the wire.
inline constexpr int kMaxBootstrapRanks = 1 << 20;

struct BootstrapOptions {
  // Seconds any operation may wait; <= 0 takes TESSERA_BOOTSTRAP_TIMEOUT (default 120).
  double timeoutSeconds = 0;
  // Tests only (tcp): the tessera version this rank announces to the root; 0: this build's.
  int helloVersionOverride = 0;
  // tcp: a file descriptor (e.g. an eventfd) that becomes readable when the caller gives up;
  // TcpBootstrap::create then stops waiting for the root and fails with tsrRemoteError.
  // -1: none. Owned by the caller. (The communicator uses it to abort a non-blocking init.)
  int cancelFd = -1;
  // Tests only (mpi): use at most this MPI tag, as an MPI whose MPI_TAG_UB is this small would
  // (>= 32767, MPI's minimum); 0: the MPI's own MPI_TAG_UB.
  int mpiTagUpperBound = 0;
};

// The timeout the options stand for: their own, else TESSERA_BOOTSTRAP_TIMEOUT (which may be
// invalid: tsrInvalidArgument).
Result resolveBootstrapTimeout(const BootstrapOptions& options, double* seconds);

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  double timeoutSeconds() const { return timeoutSeconds_; }
  // "inproc", "tcp" or "mpi".
  virtual const char* kind() const = 0;
  // Whether operations may run on a thread other than the one that made this bootstrap while
  // that thread goes on (a non-blocking init does this). MPI allows it only at
  // MPI_THREAD_MULTIPLE.
  virtual bool usableFromAnotherThread() const { return true; }

  // In place: rank r's contribution is at offset r * bytesPerRank; on return every slot holds
  // its rank's contribution.
  Result allGather(void* data, size_t bytesPerRank);
  // Messages are matched by (peer, tag) and delivered in order per (peer, tag). send returns
  // once the message is buffered (it never waits for the receiver to call recv); recv fails
  // with tsrInvalidUsage naming both sizes when the message has a different size (the message
  // is consumed). Tags are >= 0 (negative tags are the bootstrap's own); peer may be rank().
  Result send(int peer, int tag, const void* data, size_t bytes);
  Result recv(int peer, int tag, void* data, size_t bytes);
  Result barrier();
  Result broadcast(void* data, size_t bytes, int root);
  // Collective over this bootstrap: ranks with the same color form a child ordered by
  // (key, rank); color TSR_SPLIT_NOCOLOR (-1) gets a null child. The child has this one's
  // kind and timeout.
  Result split(int color, int key, std::unique_ptr<Bootstrap>* child);
  // Collective over the ranks NOT in `excluded` (which may be dead: the excluded take no part
  // and are never waited for): they form a child of the survivors in rank order, with this
  // one's kind and timeout. Fails with tsrInvalidArgument when the list names this rank, a rank
  // out of range, a rank twice, or every rank.
  Result shrink(const std::vector<int>& excluded, std::unique_ptr<Bootstrap>* child);

  // Wakes every blocked call of this instance, from any thread: they return tsrRemoteError.
  // Later calls fail with tsrInvalidUsage. Peers waiting on this rank learn at once that it is
  // gone (tsrRemoteError) with inproc, and with tcp where they have a connection with it; with
  // mpi, or tcp peers it never talked to, they fail at their deadline.
  void abort();
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

 protected:
  Bootstrap(int rank, int nranks, double timeoutSeconds)
      : rank_(rank), nranks_(nranks), timeoutSeconds_(timeoutSeconds) {}

  // The kind's work, after the arguments were checked and the deadline was set.
  virtual Result doAllGather(void* data, size_t bytesPerRank, const Deadline& deadline) = 0;
  virtual Result doSend(int peer, int tag, const void* data, size_t bytes,
                        const Deadline& deadline) = 0;
  virtual Result doRecv(int peer, int tag, void* data, size_t bytes, const Deadline& deadline) = 0;
  virtual Result doBarrier(const Deadline& deadline) = 0;
  virtual Result doBroadcast(void* data, size_t bytes, int root, const Deadline& deadline) = 0;
  // Wakes blocked calls; aborted() is already true.
  virtual void doAbort() = 0;

  // Split. The default (split.cpp) gathers every rank's (color, key), lets the lowest parent
  // rank of each color prepare the child (splitPrepare), hands what it prepared to the color's
  // members through an allGather, and each member joins with it (splitJoin). A kind with a
  // native split (mpi) overrides doSplit instead.
  static constexpr size_t kSplitPayloadBytes = 128;
  virtual Result doSplit(int color, int key, std::unique_ptr<Bootstrap>* child);
  virtual Result splitPrepare(int childSize, uint8_t payload[kSplitPayloadBytes]);
  virtual Result splitJoin(const uint8_t payload[kSplitPayloadBytes], int childRank, int childSize,
                           std::unique_ptr<Bootstrap>* child);
  // Shrink. The default (shrink.cpp) lets the lowest survivor prepare the child (splitPrepare)
  // and hand it to the other survivors by point-to-point messages, so no excluded rank is
  // involved; each survivor joins (splitJoin). `survivors` is sorted; mpi overrides it.
  static constexpr int kShrinkTag = (1 << 26) + 0x53;  // above user tags, below the layers'
  virtual Result doShrink(const std::vector<int>& survivors, std::unique_ptr<Bootstrap>* child);
  // The first step of every kind's shrink: each survivor tells the lowest one it came, which
  // waits (twice the timeout: survivors learn of a failure at different times) and checks that
  // they agree on the number of survivors.
  Result shrinkArrive(const std::vector<int>& survivors);

  // Records and returns an error whose sentence starts with "<kind> bootstrap, rank r of n: ".
  Result fail(Result code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  // The error of a call that abort() interrupted, naming the operation.
  Result interrupted(const char* operation);
  // "3 s", for sentences.
  static std::string secondsText(double seconds);

  BootstrapOptions childOptions() const;

 private:
  Result checkUsable(const char* operation);
  Result lockOps(std::unique_lock<TimedMutex>* lock, const Deadline& deadline,
                 const char* operation);

  int rank_;
  int nranks_;
  double timeoutSeconds_;
  std::atomic<bool> aborted_{false};
  TimedMutex opMutex_;
};

// Every rank of `parent` calls it (see Bootstrap::split).
inline Result splitBootstrap(Bootstrap& parent, int color, int key,
                             std::unique_ptr<Bootstrap>* child) {
  return parent.split(color, key, child);
}

}  // namespace tessera
