// The fused layer's GPU executor (fused.hpp, DeviceFusedExecutor): device workspace shared with
// every peer through the transport layer, and per call the kernels of kernels.hpp on the caller's
// stream. Split over two files: device_executor.cpp (lifetime, workspace, re-baseline, errors) and
// device_calls.cpp (what one call launches).
//
// Workspace: layout.hpp's, in device memory of this rank's GPU, allocated by the transport context
// and exchanged with every peer (tag kDeviceFusedTag, rank order). Kernels store into peers'
// workspaces through the mapped pointers, so every peer must be reached over a mapping transport
// (p2p for thread ranks, cuda_ipc for processes of one host); an unmapped peer is refused.
//
// A call whose layout differs from the previous call's re-baselines, collectively: wait until this
// rank's previous call finished on the GPU, agree on the layout with every rank (allGather; a
// mismatch is an error naming both ranks), re-allocate and re-exchange if any rank needs more
// room, zero the workspace and the call index, barrier. Counters then grow from zero again.
//
// Errors: a kernel wait that passes its deadline records itself in a mapped host record and lets
// the kernel finish without the data; the host sees it at the next call (or reserve), which fails
// with tsrTimeout and the record's sentence, and so does every later call (the ranks' counters no
// longer agree). Tests that want the verdict of their last call make one more call, or reserve.
//
// Deadlock rule (DESIGN.md, "Known hazards"): ranks sharing a GPU run their kernels concurrently
// and a waiting CTA holds its SM slot. All GEMM grids together take at most half of the GPU's GEMM
// slots (the GPU's SMs x CTAs per SM / (2 x ranks on this GPU) each), and the waiting small
// kernels take at most SMs / (2 x ranks on this GPU) CTAs each, so every kernel a wait depends on
// can always be resident.
//
// Calls of one executor must be ordered (one stream, or streams the caller orders): consecutive
// calls reuse the workspace, and the call index is a device word the end of each call advances.
// Graph capture is refused for now (tsrInvalidUsage): a layout change waits for the previous call
// through an event, which a replay does not record. Hazards shared with the collectives' device
// executor (README): keep CUDA_DEVICE_MAX_CONNECTIONS above twice the ranks per GPU (each rank
// has its stream and the executor's side stream, and a spinning kernel must not stall a queue
// it shares), and prefer CUDA_MODULE_LOADING=EAGER (init() loads this file's kernels itself).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fused/device/fused_params.hpp"
#include "fused/fused.hpp"
#include "transport/connection.hpp"
#include "transport/memory.hpp"

namespace tessera::fused {

// Tag of the executor's connections and memory exchanges (the host executor's is 0x6675).
inline constexpr int kDeviceFusedTag = 0x6676;

// What every rank must agree on: the op, the shared shape (not K_r of the reducing ops, not N_r of
// AllGather+GEMM), types, flags that change the layout, tiles, and the layout's size.
using DeviceLayoutKey = std::array<uint64_t, 12>;

class DeviceFusedEngine final : public DeviceFusedExecutor {
 public:
  explicit DeviceFusedEngine(const FusedOptions& options);
  ~DeviceFusedEngine() override;
  Result init();

  Result enqueue(const FusedCall& call, void* stream) override;
  Result reserve(const FusedCall& call, void* stream) override;
  uint64_t workspaceBytes() const override;
  void setTileConfig(const TileConfig& cfg) override { cfg_ = cfg; }
  Result asyncError() override;
  void abort() override;

 private:
  struct CallSetup {
    TileScheduler sched;     // this rank's order
    WorkspaceLayout layout;  // every rank's
    DeviceLayoutKey key;
  };

  // device_executor.cpp
  Result setup(const FusedCall& call, CallSetup* out) const;
  Result healthy();                         // the sticky failure, or a timeout the kernels recorded
  Result notCapturing(void* stream) const;  // graph capture is refused (not verified)
  Result ensureLayout(const CallSetup& cs);
  // What a call does before it launches (and all reserve does): the sticky failure, the call's
  // setup, no graph capture, the layout agreed with every rank.
  Result prepareCall(const FusedCall& call, void* stream, CallSetup* cs);
  Result rebaseline(const CallSetup& cs, bool grow);  // after every rank agreed
  Result connectPeers();
  Result waitLastCall(const char* why);
  Result fail(Result code);  // after this the ranks' counters disagree: every call fails
  void release();

  // device_calls.cpp
  FusedParams params(const FusedCall& call, const CallSetup& cs) const;
  uint32_t gemmCtas(const CallSetup& cs) const;
  uint32_t smallCtas(uint64_t units) const;
  Result launchReduceCall(const FusedCall& call, const CallSetup& cs, void* stream);
  Result launchAllGatherCall(const FusedCall& call, const CallSetup& cs, void* stream);
  Result copyEngineShards(const FusedCall& call, const CallSetup& cs, const FusedParams& p);

  FusedOptions o_;
  TileConfig cfg_;
  int sms_ = 0;
  int gemmPerSm_ = 0;
  int localRanks_ = 1;  // ranks of this communicator on this GPU (known once connected)

  void* side_ = nullptr;  // cudaStream_t: AllGather's shard copies
  void* fork_ = nullptr;  // cudaEvent_t
  void* join_ = nullptr;
  void* last_ = nullptr;  // recorded after every call
  bool lastRecorded_ = false;

  FusedControl* control_ = nullptr;  // device: FusedControl, then the peer table
  char** peerTable_ = nullptr;       // inside control_'s allocation
  FusedErrorRecord* errorHost_ = nullptr;
  FusedErrorRecord* errorDevice_ = nullptr;

  bool connected_ = false;
  std::vector<std::shared_ptr<Connection>> conns_;  // by rank; null for the own
  std::shared_ptr<Memory> ws_;
  std::vector<std::shared_ptr<RemoteMemory>> remote_;  // peers' workspaces
  std::vector<char*> peerWs_;                          // by rank, as mapped here (own included)

  bool haveLayout_ = false;
  DeviceLayoutKey key_{};
  WorkspaceLayout layout_{};
  bool sm90_ = false;     // init chose the sm_90a GEMM (gemmSm90For); launches follow it
  uint64_t calls_ = 0;    // since the last re-baseline
  bool started_ = false;  // some call got past ensureLayout (its kernels may reach peers)

  Result broken_ = tsrSuccess;
  std::string brokenWhy_;
};

}  // namespace tessera::fused
