// The host reference executor of the fused ops (fused.hpp, HostFusedExecutor): one thread per
// rank runs the tile scheduler's order and the workspace protocol of layout.hpp over the
// transport layer. Every remote write is a Connection::put from this rank's workspace (the
// registered source every transport accepts) and every remote signal a Connection::atomicAdd,
// so one code path serves inproc, shm and ucx; writes into the own workspace are plain stores.
//
// Split over three files: host_executor.cpp (workspace, connections, re-baseline, waits and
// signals), host_reduce.cpp (GEMM+ReduceScatter and GEMM+AllReduce), host_allgather.cpp
// (AllGather+GEMM).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fused/fused.hpp"
#include "fused/layout.hpp"
#include "fused/tile_scheduler.hpp"
#include "transport/connection.hpp"
#include "transport/memory.hpp"

namespace tessera::fused {

// Tag of the executor's connections and memory exchanges (the collective engine uses 0x6578).
inline constexpr int kHostFusedTag = 0x6675;

// What every rank must agree on for its workspaces to speak to each other: the layout itself
// and the call parameters it came from (without those that may differ per rank: K_r of the
// reducing ops, N_r of AllGather+GEMM). Plain words, so it travels through allGather as is.
using LayoutKey = std::array<uint64_t, 32>;

class HostFusedEngine final : public HostFusedExecutor {
 public:
  explicit HostFusedEngine(const FusedOptions& options);
  ~HostFusedEngine() override;

  Result run(const FusedCall& call) override;
  Result reserve(const FusedCall& call) override;
  uint64_t workspaceBytes() const override;
  void setTileConfig(const TileConfig& cfg) override { cfg_ = cfg; }

 private:
  // One call's view: this rank's tile order and the layout every rank shares. AllGather+GEMM's
  // layout comes from a scheduler with one tile column, so it does not depend on N_r (which may
  // differ per rank); its gather flags are then indexed (segment, chunk) with stride commTilesM.
  struct CallSetup {
    TileScheduler sched;
    WorkspaceLayout layout;
    LayoutKey key;
  };

  // host_executor.cpp
  Result setup(const FusedCall& call, CallSetup* out) const;
  Result ensureLayout(const FusedCall& call, const CallSetup& cs);
  Result connectPeers();
  Result rebaseline(const FusedCall& call, const CallSetup& cs);
  // Waits until the own workspace word at `offset` is >= target (acquire). `peer`: who should
  // have added to it (-1: several peers); `fmt` describes it for the timeout sentence.
  Result waitAtLeast(uint64_t offset, uint64_t target, int peer, const char* fmt, ...)
      __attribute__((format(printf, 5, 6)));
  // done[peer] >= callIndex_: `peer` finished the previous call, so this rank may write into its
  // workspace. Waited once per peer and call.
  Result credit(int peer);
  // Own workspace [src, +bytes) -> peer's workspace [dst, +bytes) (memcpy for the own rank).
  Result put(int peer, uint64_t dst, uint64_t src, uint64_t bytes);
  // Adds 1 to the word at `offset` of peer's workspace (release after the puts before it).
  Result signal(int peer, uint64_t offset);
  // A staging tile free for a new source (flushes the connection whose put still reads it).
  Result takeStaging(uint32_t* slot);
  void noteStagingPut(uint32_t slot, int peer);
  Result finishCall();
  Result fail(Result code);  // records a failure after which the ranks' counters disagree

  // host_reduce.cpp
  Result runReduce(const FusedCall& call, const CallSetup& cs);
  Result reduceCommTile(const FusedCall& call, const CallSetup& cs, uint32_t ct);
  Result sendReducedCommTile(const CallSetup& cs, uint32_t ct);
  Result receiveReduced(const FusedCall& call, const CallSetup& cs);
  // host_allgather.cpp
  Result runAllGather(const FusedCall& call, const CallSetup& cs);

  char* at(uint64_t offset) const { return base_ + offset; }
  uint64_t* word(uint64_t offset) const { return reinterpret_cast<uint64_t*>(base_ + offset); }

  TransportContext* ctx_;
  int rank_;
  int nranks_;
  double timeout_;
  TileConfig cfg_;

  bool connected_ = false;
  std::vector<std::shared_ptr<Connection>> conns_;     // by peer; null for the own rank
  std::vector<std::shared_ptr<RemoteMemory>> remote_;  // peers' workspaces
  std::vector<Connection*> unmapped_;                  // need flush() and progress()

  std::shared_ptr<Memory> mem_;
  char* base_ = nullptr;
  bool haveLayout_ = false;
  LayoutKey key_{};
  WorkspaceLayout layout_{};
  uint64_t callIndex_ = 0;  // calls since the last re-baseline
  const char* opName_ = "";

  std::vector<uint8_t> credited_;  // by peer, this call
  std::array<Connection*, kStagingTiles> stagingPending_{};
  uint32_t nextStaging_ = 0;

  // Scratch kept between calls (float views of A and B, a tile, a row).
  std::vector<float> aFloat_, bFloat_, tile_, row_;
  std::vector<uint8_t> ready_;

  Result broken_ = tsrSuccess;
  std::string brokenWhy_;
};

}  // namespace tessera::fused
