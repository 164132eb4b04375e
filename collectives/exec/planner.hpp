// The planner of one engine (DESIGN.md, "One call, end to end"): what a collective call needs
// before an executor runs it, the same for host and device calls. It numbers calls, checks what
// every call must satisfy, asks the tuner (one tuner, one snapshot), and keeps the verified plans
// and the tuner's choices. The executors behind it (the host executor, the device executor on a
// GPU or emulated on host threads) bind and run what it returns.
//
// Nothing here talks to a peer: the collective agreements the tuner needs (transport classes, the
// tuner file) are the engine's, passed in as TransportKinds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/exec/engine.hpp"
#include "collectives/exec/plan_cache.hpp"
#include "collectives/plan/plan.hpp"
#include "collectives/tuner/tuner.hpp"
#include "core/status.hpp"

namespace tessera {

// Which executor a choice is for: the host executor, or the device executor (a GPU, or its
// emulation on host threads).
enum class ExecKind : uint8_t { kHost, kDevice };

// Which plans a host choice may use: staging through the scratch, zero-copy (registered buffers or
// threads of one process), or zero-copy through cross-memory attach. Device calls always stage.
enum class Staging : uint8_t { kScratch, kZeroCopy, kCross };

// The plan a tuner choice runs as (family, pipeline, workers, zero-copy) on an executor whose
// grid has `minWorkers` CTAs (0 or 1 on the host executor). Planner::choose generates it, and
// tessera_sim simulates the same plan for the product's choice.
PlanKey planKeyOf(ExecKind kind, Collective c, int root, Staging staging, const TuneChoice& choice,
                  int minWorkers);

// What the tuner chose for a call shape, kept while the tuner's parameters stay the same.
struct PlanChoice {
  std::shared_ptr<const Plan> plan;  // verified; null: no candidate (kCross where staging wins)
  bool ll = false;                   // device: the LL protocol (plan is the fallback)
  BoundPlan* bound = nullptr;        // host: the plan bound to the engine's resources, once bound
};

// The transport classes the tuner sees (agreed by every rank).
struct TransportClasses {
  TransportKind intra = TransportKind::kShm;
  TransportKind inter = TransportKind::kUcx;
};

class Planner {
 public:
  // Reads the tuner from the environment (Tuner::fromEnv).
  Result init(int rank, int nranks, std::vector<int> hostOf);

  Tuner& tuner() { return tuner_; }
  const Tuner& tuner() const { return tuner_; }
  // What the tuner's device model needs beyond the call (TuneInput::scratchBytes, nicsPerHost,
  // devicePcie): the device executor's scratch per plan, the NICs per host every rank agreed on,
  // and whether some rank's GPUs are joined by PCIe only. Set before the first device choice.
  void setDevice(uint64_t scratchBytes, int nicsPerHost, bool pcie = false) {
    deviceScratch_ = scratchBytes;
    nicsPerHost_ = nicsPerHost;
    devicePcie_ = pcie;
  }

  // Call numbers: the next call takes next() once it is sure to run (take()), so a refused call
  // never moves this rank's count ahead of its peers' (handshakes compare the numbers).
  uint64_t next() const { return calls_ + 1; }
  void take(uint64_t callNo) { calls_ = callNo; }

  // The checks every collective passes before it is numbered, host or device.
  Result admit(const CollCall& call, uint64_t callNo) const;
  // The checks every group of sends and receives passes before anything is set up or queued,
  // host or device: peers in range, each send to self with its receive of the same size.
  Result admitP2P(const std::vector<P2PCall>& calls) const;
  // A plan given with the call (CollCall::plan): for the call's collective, rank count and root,
  // and verified (once per plan).
  Result givenPlan(const CollCall& call);
  // The plan of the family the call names (CollCall::algorithm), default pipeline and one worker;
  // with `zeroCopy`, its zero-copy form where it has one (Plan::zeroCopy says), else its staged
  // plan.
  Result namedPlan(const CollCall& call, bool zeroCopy, std::shared_ptr<const Plan>* out);
  // The generated plan of `key`, verified once and kept for the engine's life.
  Result generated(const PlanKey& key, std::shared_ptr<const Plan>* out);

  // The tuner's input for a call of `bytes` (callBytes) among this engine's ranks.
  TuneInput tuneInput(Collective c, size_t bytes, int root, TransportClasses classes,
                      ExecKind kind) const;
  // The tuner's choice for a call shape, cached. `minWorkers` (device: its CTAs, up to two) raises
  // the plan's workers so that no CTA idles. The entry stays valid until the next choose().
  Result choose(ExecKind kind, Collective c, size_t bytes, int root, Staging staging,
                TransportClasses classes, int minWorkers, PlanChoice** out);

 private:
  struct ChoiceKey {
    uint8_t kind;
    uint8_t collective;
    uint8_t staging;
    int32_t root;
    uint64_t bytes;
    bool operator==(const ChoiceKey&) const = default;
  };
  struct ChoiceHash {
    size_t operator()(const ChoiceKey& k) const {
      return static_cast<size_t>(
          (k.bytes * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(k.collective) << 40) ^
          (static_cast<uint64_t>(k.kind) << 48) ^
          (static_cast<uint64_t>(static_cast<uint32_t>(k.root)) << 8) ^ k.staging);
    }
  };
  struct Named {
    std::string algorithm;
    Collective collective;
    int root;
    bool zeroCopy;
    std::shared_ptr<const Plan> plan;
  };
  PlanChoice* remember(const ChoiceKey& key, PlanChoice choice);

  int rank_ = 0;
  int nranks_ = 1;
  std::vector<int> hostOf_;  // size nranks
  uint64_t deviceScratch_ = 0;
  int nicsPerHost_ = 1;
  bool devicePcie_ = false;
  uint64_t calls_ = 0;
  Tuner tuner_;
  TunerParams snapshot_{};
  // One entry per distinct shape: a program whose sizes never repeat (a soak of random sizes)
  // would grow the map without end, so it starts over at kMaxChoices. The plans stay in plans_.
  static constexpr size_t kMaxChoices = 4096;
  std::unordered_map<ChoiceKey, PlanChoice, ChoiceHash> choices_;
  ChoiceKey lastKey_{};
  PlanChoice* last_ = nullptr;  // a loop of equal calls skips the hash
  std::map<PlanKey, std::shared_ptr<const Plan>> plans_;
  std::map<const Plan*, std::shared_ptr<const Plan>> given_;  // verified, kept alive
  std::vector<Named> named_;  // CollCall::algorithm -> plan, without string maps
};

}  // namespace tessera
