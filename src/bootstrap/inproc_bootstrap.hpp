// In-process bootstrap: the ranks are threads of one process sharing an InprocGroup.
//
//   std::shared_ptr<InprocGroup> group;
//   InprocBootstrap::createGroup(n, options, &group);     // once
//   group->join(rank, &bootstrap);                          // on each rank's thread
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace tessera {

class InprocBootstrap;

class InprocGroup : public std::enable_shared_from_this<InprocGroup> {
 public:
  ~InprocGroup();
  int nranks() const;
  // Makes rank `rank`'s bootstrap; each rank joins once. Does not wait for the other ranks (a
  // rank that never joins shows up as missing in the first collective, at its deadline).
  Result join(int rank, std::unique_ptr<Bootstrap>* out);

 private:
  friend class InprocBootstrap;
  struct State;
  explicit InprocGroup(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class InprocBootstrap final : public Bootstrap {
 public:
  static Result createGroup(int nranks, const BootstrapOptions& options,
                            std::shared_ptr<InprocGroup>* group);
  // Leaving the group: peers waiting for this rank fail at once with tsrRemoteError.
  ~InprocBootstrap() override;
  const char* kind() const override { return "inproc"; }

 protected:
  Result doAllGather(void* data, size_t bytesPerRank, const Deadline& deadline) override;
  Result doSend(int peer, int tag, const void* data, size_t bytes,
                const Deadline& deadline) override;
  Result doRecv(int peer, int tag, void* data, size_t bytes, const Deadline& deadline) override;
  Result doBarrier(const Deadline& deadline) override;
  Result doBroadcast(void* data, size_t bytes, int root, const Deadline& deadline) override;
  void doAbort() override;
  Result splitPrepare(int childSize, uint8_t payload[kSplitPayloadBytes]) override;
  Result splitJoin(const uint8_t payload[kSplitPayloadBytes], int childRank, int childSize,
                   std::unique_ptr<Bootstrap>* child) override;

 private:
  friend class InprocGroup;
  enum class Op { kAllGather, kBarrier, kBroadcast };
  InprocBootstrap(std::shared_ptr<InprocGroup> group, int rank, int nranks, double timeout);
  Result collective(Op op, void* data, size_t bytes, int root, const Deadline& deadline);

  std::shared_ptr<InprocGroup> group_;
  uint64_t sequence_ = 0;  // how many collectives this rank has entered
};

}  // namespace tessera
