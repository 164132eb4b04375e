// A world of N ranks in one process for the device backend's host tests: each rank's plan is
// generated and compiled (compilePlan), bound by hand into a DevicePlan over host memory (scratch,
// semaphores from plain counters, peers' scratch mapped directly or reached through a test proxy
// that carries out port-channel triggers with memcpy), and run with DeviceItemRunner<HostGroup>
// on `nctas` host threads per rank.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/exec/device/item_runner.hpp"
#include "collectives/exec/plan_cache.hpp"
#include "collectives/plan/plan.hpp"
#include "core/reduce_op.hpp"

namespace tessera::test {

struct WorldConfig {
  Collective collective = Collective::kAllReduce;
  std::string algorithm = "ring";
  int nranks = 2;
  int root = 0;
  int workers = 1;
  int nctas = 1;
  uint64_t count = 1000;
  tsrDataType_t dtype = tsrFloat32;
  RedOpDesc op;
  // Scratch holds this many quanta (cps * 64 bytes) per segment: small values give many
  // iterations.
  uint64_t scratchQuanta = 2;
  bool unmapped = false;         // every peer through a port channel (the test proxy)
  uint64_t stagingBytes = 4096;  // per CTA, unmapped only
  uint64_t timeoutNs = 10'000'000'000ull;
  std::vector<int> absent;           // ranks that never run (timeouts)
  std::shared_ptr<const Plan> plan;  // a hand-written plan instead of generatePlan's
};

// Per rank: what runs and what comes out.
struct RankState {
  BoundPlan bp;
  exec::DevicePlan dp{};
  std::vector<exec::DevicePeer> peers;
  std::vector<exec::DeviceSem> sems;
  std::vector<uint32_t> barrierCounts;
  std::vector<uint64_t> scratch, staging, input, output;  // uint64_t: 8-byte aligned bytes
  // Queue words (only the error record, flags and grid barrier are used).
  exec::ErrorRecord error{};
  exec::GridSync grid{};
  uint64_t posted = 0, consumed = 0;
  uint32_t abortFlag = 0, stopFlag = 0;
  exec::WorkQueueHandle queue{};
  exec::WorkItem item{};
  // Proxy FIFO (unmapped).
  std::vector<device::ProxyTrigger> triggers;
  uint64_t head = 0, tail = 0, fifoError = 0;
  bool ok = false;  // runItem's result in every CTA
};

class World {
 public:
  explicit World(const WorldConfig& cfg) : cfg_(cfg) {}
  // Generates, compiles and binds; false (with a gtest failure) when a step failed.
  bool setup();
  // Fills the inputs with small integers (exact in every type) from `seed`.
  void fillInputs(uint32_t seed);
  // Runs every present rank's item on nctas threads each (and the proxies); returns when all
  // returned.
  void run();
  // The expected output of rank r, computed serially from the inputs with core's reduce.
  std::vector<uint8_t> expected(int r) const;
  RankState& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  uint64_t elemSize() const { return elem_; }
  uint64_t iters() const { return iters_; }
  bool checksOutput(int r) const {
    return cfg_.collective != Collective::kReduce || r == cfg_.root;
  }
  uint64_t outputBytes() const;

 private:
  void proxy(int r, const std::atomic<bool>& stop);
  uint64_t* counter(int owner, int peer, int channel) { return &counters_[{owner, peer, channel}]; }

  WorldConfig cfg_;
  std::shared_ptr<const Plan> plan_;
  std::vector<std::unique_ptr<RankState>> ranks_;
  std::map<std::array<int, 3>, uint64_t> counters_;  // (owner, peer, channel) -> inbound
  std::map<std::array<int, 3>, uint64_t> expected_;  // (owner, peer, channel) -> consumed
  uint64_t elem_ = 4;
  uint64_t slice_ = 0;
  uint64_t iters_ = 0;
};

}  // namespace tessera::test
