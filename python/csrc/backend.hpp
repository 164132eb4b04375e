// TesseraBackend: torch.distributed's c10d::Backend over libtessera's C API (tessera.h only; the
// design's rule: the PyTorch backend is a user of the public API like any other).
//
// Communicators. A group has
//   comm_     its collectives on host tensors, and the sends and receives that its gather,
//             scatter and list all-to-all are made of (matched in collective order);
//   p2pComm_  torch's send/recv (a split of comm_ made at creation): its own order, so a message
//             sent before a collective and received after it never meets the collective's;
//   device_   (CUDA tensors) a split of comm_ bound to the tensors' GPU, made by the group's
//             first CUDA collective, and a 2-rank communicator per peer for CUDA send/recv, made
//             through the store by the first CUDA message between the two (as ProcessGroupNCCL).
// Tags (p2p.cpp): every message is announced by a small header on p2pComm_ (tag, bytes, where the
// payload travels), so a receive takes the first message of its tag from that peer whatever the
// order they were sent in; messages of other tags are kept until their receive comes.
//
// Calls run in issue order on the group's CallQueue (work.hpp). Arguments are checked on the
// calling thread, before anything is queued: a bad call raises at once and nothing runs.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "p2p.hpp"
#include "work.hpp"

namespace tessera_torch {

class DeviceState;  // cuda.cpp

class TesseraBackend final : public c10d::Backend {
 public:
  // One rank of a new group: rank 0 makes tessera's unique id and sets it in `store`, the others
  // get it (so env://, tcp:// and file:// init all work). The timeout bounds every tessera wait.
  TesseraBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                 std::chrono::milliseconds timeout, std::string groupName);
  // A split child over communicators made by tsrCommSplit (splitColor), which it owns.
  TesseraBackend(tsrComm_t comm, tsrComm_t p2pComm, int rank, int size,
                 std::chrono::milliseconds timeout, std::string groupName,
                 c10::intrusive_ptr<c10d::Store> store);
  ~TesseraBackend() override;

  static c10::intrusive_ptr<TesseraBackend> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                   int rank, int size,
                                                   std::chrono::milliseconds timeout,
                                                   std::string groupName);

  const std::string getBackendName() const override { return "tessera"; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override { return calls_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  // dist.all_gather_coalesced: outputs[r][i] gets input i of rank r (Gloo's layout); one
  // all-gather of every input packed together.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    return all_gather_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& outputSplits,
                                                   std::vector<int64_t>& inputSplits,
                                                   const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override {
    return all_to_all_single(output, input, outputSplits, inputSplits, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  // dist.recv / irecv without src: the first message of `tag` from any other rank (P2P::recvAny);
  // the Work's sourceRank() names its sender. Groups larger than TESSERA_TORCH_ANY_SOURCE_RANKS
  // refuse it (their pairs are not all linked).
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // ProcessGroup::splitGroup (torch's split_group): collective over this group; `ranks` (this
  // group's ranks, in the child's order) that do not include this rank make it take no part.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // new_group's child made from this group (split_from): color and key as tsrCommSplit takes
  // them; a rank outside the new group passes TSR_SPLIT_NOCOLOR (perform_nocolor_split).
  c10::intrusive_ptr<TesseraBackend> splitColor(int color, int key, int childSize,
                                                std::chrono::milliseconds timeout,
                                                const std::string& groupName);

  // Stops at once: tessera's waits give up, queued calls fail (tsrCommAbort). Local.
  void abort() override;
  // Every queued call runs (each within its deadline), then the communicators end: finalized
  // together when no call failed, else destroyed locally (a dead peer cannot hold this up).
  void shutdown() override;

  int nranks() const { return size_; }
  int rank() const { return rank_; }

 private:
  friend class Batch;
  friend class P2P;
  void setupQueue();

  // A call as it runs on the queue: `issue` makes its tessera calls (inside the batch's tessera
  // group when coalesced: nothing of their results may be read there), `finish` what comes after
  // them (copies out of temporaries); `p2p` (sends and receives) run through P2P instead.
  struct Steps {
    std::function<void()> issue;
    std::function<void()> finish;
    std::vector<P2POp> p2p;
    std::vector<at::Tensor> tensors;  // device calls: what the stream uses (recordStream)
    // The call as TESSERA_TORCH_CHECK_CALLS compares it between ranks (callSignature), made only
    // when that check is on; empty: not compared (send/recv, coalesced calls, check off).
    std::string signature;
  };
  // Runs a call in issue order (or records it in the open coalescing batch) and returns its Work.
  // `async`: the caller does not wait at once (the progress thread runs it). `device`: the CUDA
  // tensor whose device and current stream a device call runs on (undefined on the host).
  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, const char* title,
                                        std::vector<at::Tensor> outputs, bool async, Steps steps,
                                        const at::Tensor& device = at::Tensor());
  // TESSERA_TORCH_CHECK_CALLS: every rank's signature of this call, compared (an all-gather on
  // the host communicator, in the call's turn); throws naming a rank whose call differs.
  void verifyCall(const std::string& signature);
  bool checkCalls_ = false;
  // Throws unless the group can take calls (not aborted or shut down).
  void checkOpen(const char* api) const;
  // The communicator a collective on `t` runs on: comm_ for host tensors; for CUDA tensors the
  // device communicator (made, collectively, by the first one). On the queue only.
  tsrComm_t commFor(const at::Tensor& t);
  // The stream a device call runs on (the group's stream of that device), or null on the host.
  void* streamFor(const at::Tensor& t);

  c10::intrusive_ptr<Options> options_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  tsrComm_t comm_ = nullptr;
  tsrComm_t p2pComm_ = nullptr;
  std::shared_ptr<CallQueue> queue_;
  std::unique_ptr<P2P> p2p_;
  std::unique_ptr<DeviceState> device_;
  uint64_t calls_ = 0;
  std::atomic<bool> closed_{false};  // aborted or shut down
  // A call failed with a fault (DistBackendError: a dead peer, a deadline, an abort): the end is
  // local (no finalize, whose barrier would wait for peers that may be gone). Bad input refused
  // with ValueError (a receive of the wrong size, a bad dtype) leaves the communicator usable
  // and the end orderly: marking it failed made this rank skip finalize while its peers waited
  // for it there until their deadline.
  std::atomic<bool> failed_{false};
  std::mutex stateMutex_;

  // Coalescing (startCoalescing .. endCoalescing): the calls recorded, run as one tessera group.
  struct Recorded {
    Steps steps;
    c10::intrusive_ptr<TesseraWork> work;
  };
  // Runs the steps of several calls as one tessera group (a coalesced batch, or one call).
  void runSteps(std::vector<Steps*>& calls);
  // The steps of several calls as one call's (their tessera calls in one group).
  static Steps groupOf(std::shared_ptr<std::vector<Steps>> all);
  Steps gatherSingleSteps(const at::Tensor& output, const at::Tensor& input, const char* api);
  Steps scatterSingleSteps(const at::Tensor& output, const at::Tensor& input,
                           const c10d::ReduceOp& op, const char* api);
  // Sends and receives on comm_ (gather, scatter, list all-to-all): one tessera group.
  struct Transfer {
    bool isSend;
    int peer;
    at::Tensor tensor;  // contiguous
  };
  Steps transferSteps(std::vector<Transfer> transfers);
  // The children split() made, by group name (null: this rank is not in the group).
  std::map<std::string, c10::intrusive_ptr<TesseraBackend>> splits_;
  bool coalescing_ = false;
  // Every pair of p2pComm_ was linked at creation (P2P::connectAll): recv from any source works.
  bool anySource_ = false;
  std::vector<Recorded> batch_;
};

}  // namespace tessera_torch
