// One rank of a communicator: its bootstrap, where every rank lives, its config, and its state.
// Owned through shared_ptr by tessera::Communicator (and so by the C handle table).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "comm/config.hpp"
#include "comm/revoke.hpp"
#include "core/reduce_op.hpp"
#include "topology/placement.hpp"
#include "topology/rank_path.hpp"
#include "transport/context.hpp"

namespace tessera {

class CollectiveEngine;
struct Plan;
namespace fused {
class HostFusedExecutor;
class DeviceFusedExecutor;
}  // namespace fused

class CommImpl final : public RevokeSink {
 public:
  // kRevoked: tsrCommRevoke, a fault this rank saw, or a peer's notice (see revoke()); only
  // shrink, split and destroy may follow.
  enum class State { kInitializing, kReady, kFinalized, kAborted, kFailed, kRevoked };
  // Makes this rank's bootstrap (joining the others). cancelFd becomes readable when abort() is
  // called, so a factory that waits (tcp) can stop early.
  using BootstrapFactory = std::function<Result(int cancelFd, std::unique_ptr<Bootstrap>*)>;

  // Creates the rank. `makeBootstrap` joins the other ranks (it blocks); it and the exchange of
  // placements run on the calling thread when config.blocking, else on a background thread
  // while the call returns tsrInProgress and asyncError() reports tsrInProgress.
  // rank/nranks: what the caller asked for, or -1 when the bootstrap decides (MPI, split).
  static Result create(int rank, int nranks, const CommConfig& config,
                       BootstrapFactory makeBootstrap, std::shared_ptr<CommImpl>* out);

  // A rank whose bootstrap exists already (MPI, split): only the exchange of placements is left.
  // A non-blocking config runs on the calling thread when the bootstrap may not be driven from
  // another thread (MPI below MPI_THREAD_MULTIPLE).
  static Result createWith(std::unique_ptr<Bootstrap> bootstrap, CommConfig config,
                           std::shared_ptr<CommImpl>* out);

  ~CommImpl() override;
  CommImpl(const CommImpl&) = delete;
  CommImpl& operator=(const CommImpl&) = delete;

  // tsrSuccess when the communicator can take `api`; otherwise the error, with a sentence.
  Result checkReady(const char* api) const;

  Result split(int color, int key, const tsrConfig_t* config, std::shared_ptr<CommImpl>* out);
  // tsrCommShrink: the ranks not in `excluded` form a new communicator (collective over them
  // only). With TSR_SHRINK_ABORT this rank's work on this communicator is aborted first (its
  // transports and executors; the bootstrap, which the shrink needs, is kept), as after a
  // failure; this communicator is then only fit for tsrCommDestroy.
  Result shrink(const std::vector<int>& excluded, const tsrConfig_t* config, int flags,
                std::shared_ptr<CommImpl>* out);
  // tsrCommGetUniqueId: a fresh id (a bootstrap root in this process) for one grow; refused
  // while this rank's previous one has not been used by its tsrCommGrow.
  Result growUniqueId(tsrUniqueId* id);
  // tsrCommGrow's part over this communicator (collective, blocking): every rank learns the id
  // (from the one rank that passed it) and checks that all ask for the same larger size, so
  // they all fail alike on a disagreement; then each joins the new communicator as a new rank
  // would (Communicator::grow). childConfig: config, or this communicator's when null.
  Result growAgree(int nranks, const tsrUniqueId* id, const tsrConfig_t* config,
                   tsrUniqueId* agreed, CommConfig* childConfig);
  // Completes this rank's outstanding work (calls running on other threads, then the device
  // executor's stream-ordered calls), each within a deadline a little beyond the calls' own
  // (tsrTimeout naming what was waited for), and then waits for every rank (bootstrap barrier).
  // Calls started once it has begun are refused.
  Result finalize();
  // Tells the other ranks (a revocation notice naming this rank) unless the communicator was
  // already revoked, then tears this rank down without waiting for them.
  void abort();

  // Revocation (DESIGN.md, "Faults and revocation"). tsrCommRevoke: this rank's calls on the
  // communicator, running and later, fail with tsrRemoteError naming the first culprit, and every
  // other rank is told so (a notice, through the process's revoke service, not the transports),
  // so theirs fail within a moment too. Its work is stopped (executors and transports; the
  // bootstrap is kept for a shrink). revokeFlags must be 0 (TSR_REVOKE_DEFAULT). A communicator
  // already revoked: tsrSuccess, nothing more happens.
  Result revoke(int revokeFlags);
  // A call of this communicator ended with `r` (its sentence is this thread's last error). A
  // fault (tsrRemoteError, tsrTimeout, tsrSystemError) of a communicator not yet revoked revokes
  // it, naming this rank and that sentence, and `r` is returned as it is; on a revoked
  // communicator any failure becomes tsrRemoteError with the revocation's sentence.
  Result callFailed(Result r, const char* api);
  bool revoked() const { return state_.load() == State::kRevoked; }
  // RevokeSink: a peer's notice (on the revoke service's thread).
  void revokedByPeer(const RevokeNotice& notice) override;

  // A call of this rank runs between beginWork() and endWork() (group.cpp, fused.cpp), so that
  // finalize() can wait for it. beginWork fails (tsrInvalidUsage, naming `api`) once finalize()
  // has begun.
  Result beginWork(const char* api);
  void endWork();
  class WorkScope {
   public:
    WorkScope() = default;
    WorkScope(const WorkScope&) = delete;
    WorkScope& operator=(const WorkScope&) = delete;
    ~WorkScope() {
      if (comm_ != nullptr) comm_->endWork();
    }
    Result enter(CommImpl* comm, const char* api) {
      TSR_CHECK(comm->beginWork(api));
      comm_ = comm;
      return tsrSuccess;
    }

   private:
    CommImpl* comm_ = nullptr;
  };
  // Calls of this communicator running now (tests wait on it instead of guessing with a sleep).
  int callsInFlight() const { return inFlight_.load(); }
  // The communicator's state error, or else the device executor's first failure (a call on device
  // buffers that timed out or was aborted on its stream).
  Result asyncError() const;

  // -1 while a non-blocking init has not yet learned them from the bootstrap (MPI, split).
  int rank() const { return rank_.load(std::memory_order_acquire); }
  int nranks() const { return nranks_.load(std::memory_order_acquire); }
  int cudaDevice() const { return device_; }
  const CommConfig& config() const { return config_; }
  uint64_t commHash() const { return commHash_; }
  const std::vector<RankPlacement>& placements() const { return placements_; }
  Locality localityOf(int peer) const;
  // NCCL's path class from this rank to `peer` (NET across hosts, LOC on one GPU, the GPU pair's
  // class from this host's topology otherwise).
  Result pathClassTo(int peer, PathClass* out) const;
  // Ranks on this rank's host (as TESSERA_HOST_ID / host id says), and this rank's index there.
  int localRank() const { return localRank_; }
  int localRanks() const { return localRanks_; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  // The communicator's transport context, made on first use: collective (every rank calls it the
  // first time in the same order, as collectives do). Connections inside it are made lazily.
  Result transports(TransportContext** out);
  // The communicator's collective engine, made on first use on top of transports(): collective
  // the first time, whichever call makes it (every rank's first collective, group or
  // registration-free call reaches it in the same order). Registrations made before it existed
  // are handed to it then.
  Result collectives(CollectiveEngine** out);
  // Whether collectives() has made the engine (a call that must not be the one to make it asks).
  bool engineMade() const { return enginePublished_.load(std::memory_order_acquire) != nullptr; }
  // The communicator's fused GEMM executors (tsrGemmReduceScatter and friends; src/comm/fused.cpp),
  // made on first use on top of transports(), like collectives(): collective the first time.
  // The device one fails with tsrInvalidUsage where this build or rank has no fused GPU kernels.
  Result fusedHost(fused::HostFusedExecutor** out);
  Result fusedDevice(fused::DeviceFusedExecutor** out);
  // Seconds a call may wait for its peers (the transport context's deadline); 0 before
  // collectives() succeeded.
  double callTimeoutSeconds() const { return callTimeout_.load(); }

  // Overrides of the tuner's choice for every collective this rank starts from now on (perf's
  // -A and --plan, tests that force an algorithm): a family name, or a plan; empty / null: the
  // tuner decides. Every rank must set the same override before the same call.
  void setCallOverride(std::string algorithm, std::shared_ptr<const Plan> plan);
  void callOverride(std::string* algorithm, std::shared_ptr<const Plan>* plan) const;

  // tsrCommRegister / tsrCommDeregister: local. The handle is tessera's own (never reused, so a
  // handle of another communicator or one already deregistered is recognised as such).
  // `onDevice`: device memory of this rank's GPU, handed to the engine as a local device
  // registration (zero-copy where every rank is in this process; windows map across processes).
  Result registerBuffer(void* ptr, size_t bytes, bool onDevice, void** handle);
  Result deregisterBuffer(void* handle);
  // tsrCommWindowRegister / tsrCommWindowDeregister: collective. Device memory becomes a window of
  // the engine's device executor (zero-copy device calls); host memory a registration as above.
  // The handle is tessera's own, as a registration's.
  Result registerWindow(void* ptr, size_t bytes, bool onDevice, void** handle);
  Result deregisterWindow(void* handle);

  Result redOpCreatePreMulSum(tsrRedOp_t* op, const void* scalar, tsrDataType_t dtype,
                              tsrScalarResidence_t residence);
  Result redOpDestroy(tsrRedOp_t op);
  // The descriptor of a built-in or user-created op (tsrInvalidArgument if unknown).
  Result redOpLookup(tsrRedOp_t op, tsrDataType_t dtype, RedOpDesc* out) const;

 private:
  CommImpl(int rank, int nranks, const CommConfig& config);
  Result initCollective(const BootstrapFactory& makeBootstrap);
  // Executors and transports stop and the state becomes aborted; the bootstrap too when
  // bootstrapToo (abort()), not for a shrink, which still needs it.
  void abortWork(bool bootstrapToo, bool setAborted = true);
  // Revokes (once): records who and why, tells the others when `notify`, stops the work.
  void revokeAs(int fromRank, Result code, const std::string& why, bool notify, bool setAsyncError);
  // Sends the notices on noticeThread_ (once per communicator); joinNotices waits for it.
  void sendNotices(Result code, const std::string& why);
  void joinNotices();
  // The sentence of a revoked communicator's failures.
  Result revokedError(const char* api) const;
  // finalize()'s first half: this rank's outstanding work, complete or tsrTimeout.
  Result drain();
  double drainTimeoutSeconds() const;
  Result bindDevice();

  // Written once by the init thread, read by any thread (the C API logs with the rank).
  std::atomic<int> rank_;
  std::atomic<int> nranks_;
  CommConfig config_;
  int device_ = TSR_DEVICE_HOST;
  std::string busId_;
  uint64_t commHash_ = 0;

  std::unique_ptr<Bootstrap> bootstrap_;
  std::vector<RankPlacement> placements_;
  int localRank_ = 0;
  int localRanks_ = 1;

  std::atomic<State> state_{State::kInitializing};
  // Calls between beginWork and endWork; finalize sets finalizing_ and then waits for zero
  // (both sequentially consistent, so a call either sees the flag or is counted).
  std::atomic<int> inFlight_{0};
  std::atomic<bool> finalizing_{false};
  std::atomic<Result> asyncError_{tsrInProgress};
  std::atomic<bool> abortFlag_{false};
  std::thread initThread_;
  std::mutex bootstrapMutex_;  // guards bootstrap_ while a non-blocking init may set it
  int cancelFd_ = -1;          // eventfd written by abort(), read by the bootstrap factory

  // Revocation: this rank's endpoint of the revoke service (reset first in the destructor, so
  // no notice reaches a rank being destroyed), every rank's service address, the communicator's
  // id in notices, and the first revocation's culprit and sentence (under revokeMutex_).
  std::unique_ptr<RevokeEndpoint> revokeEndpoint_;
  std::vector<RevokeAddress> revokePeers_;
  uint64_t commId_ = 0;
  mutable std::mutex revokeMutex_;
  int revokeFrom_ = -1;
  std::string revokeWhy_;
  bool noticesSent_ = false;
  // tsrCommGetUniqueId made an id this rank's tsrCommGrow has not used yet (under revokeMutex_).
  bool growIdPending_ = false;
  std::mutex noticeThreadMutex_;
  std::thread noticeThread_;

  std::mutex transportMutex_;
  std::unique_ptr<TransportContext> transports_;  // destroyed before bootstrap_ (declared after)

  // Engine state (comm_engine.cpp). engineMutex_ is taken before transportMutex_, never after.
  struct Registration {
    void* ptr = nullptr;
    size_t bytes = 0;
    void* engineHandle = nullptr;  // null until the engine exists (or if it refused the buffer)
    bool onDevice = false;         // a device registration (registerDeviceBuffer)
  };
  std::mutex engineMutex_;
  std::map<uint64_t, Registration> registrations_;  // by handle id
  struct Window {
    void* engineHandle = nullptr;  // the engine's window (device memory)
    uint64_t registration = 0;     // host memory: the id in registrations_
  };
  std::map<uint64_t, Window> windows_;  // by handle id
  std::atomic<double> callTimeout_{0};
  mutable std::mutex overrideMutex_;
  std::string overrideAlgorithm_;
  std::shared_ptr<const Plan> overridePlan_;
  // Declared after transports_ so it is destroyed first: its plans hold the context's memory
  // and connections (the destructor also resets it first, explicitly).
  std::unique_ptr<CollectiveEngine> engine_;
  // engine_.get() once made, for the calls that must not wait for engineMutex_ (held while the
  // engine is made, which waits for peers): asyncError() and abort().
  std::atomic<CollectiveEngine*> enginePublished_{nullptr};
  // Declared after transports_ (destroyed first: their workspaces are the context's memory).
  std::mutex fusedMutex_;
  std::unique_ptr<fused::HostFusedExecutor> fusedHost_;
  std::unique_ptr<fused::DeviceFusedExecutor> fusedDevice_;
  // fusedDevice_.get() once made, for asyncError() and abort() (which must not wait for
  // fusedMutex_, held while a call sets up its workspace with the peers).
  std::atomic<fused::DeviceFusedExecutor*> fusedDevicePublished_{nullptr};

  mutable std::mutex redOpMutex_;
  std::vector<std::unique_ptr<RedOpDesc>> userOps_;  // index i <-> handle tsrNumOps + i
};

const char* commStateName(CommImpl::State s);

}  // namespace tessera
