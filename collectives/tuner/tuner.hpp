// The tuner (DESIGN.md, "Tuner"): picks algorithm, pipelining and workers per (collective, bytes,
// ranks, topology) from an alpha-beta cost model, and applies the user's overrides.
//
// Model: a plan's time = sum over its steps of (alpha_t + bytes_step / beta_t) for the transport
// t each step crosses, plus a reduction cost per reduced byte (gamma) and a per-call overhead.
// Each family has a closed-form step count and bytes per step (ring: 2(n-1) steps of bytes/n for
// allreduce; tree: 2 log2 n steps pipelined; rhd: 2 log2 n steps of halving size; oneshot: one
// step of bytes with n-1 peers reading; ...). Parameters per transport come from
// TESSERA_TUNER_FILE (JSON: {"links": {"inproc": {"alphaUs": .., "betaGBs": ..}, ...},
// "crossMemory": {...}, "gammaGBs": .., "callOverheadUs": ..}) when set, else from the defaults
// below.
//
// Overrides, in NCCL's syntax:
//   TESSERA_ALGO   "ring,tree" (only these), "^tree" (all but),
//   "allreduce:ring,tree;allgather:^rhd"
//                  (per collective). Names are the families of algorithms.hpp, case-insensitive.
//   TESSERA_PROTO  "Simple", "LL" (NCCL's names, case-insensitive; "LL128" parses but tessera has
//                  no such protocol). LL runs within one host over mapped transports: on the
//                  device executor for calls that exec::llSupports accepts (the tuner's model
//                  decides), on the host executor for small all-reduce, all-gather and
//                  reduce-scatter (EngineImpl::hostLLFits: up to 4 KiB, not through the model);
//                  "LL" forces it wherever it runs (Simple elsewhere), "^LL" forbids it. A value
//                  that leaves a collective neither Simple nor LL is an error.
// TESSERA_DETERMINISTIC=1 keeps only canonical-order families for reducing collectives.
// TESSERA_DEBUG_SUBSYS=TUNING logs each choice with the predicted time of every candidate.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/plan/plan.hpp"
#include "collectives/tuner/tuner_table.hpp"
#include "core/status.hpp"
#include "transport/types.hpp"

namespace tessera {

struct LinkModel {
  double alphaUs = 1.0;  // latency of one step (signal + wait), microseconds
  double betaGBs = 5.0;  // bandwidth of one stream, GB/s
};

struct TunerParams {
  std::array<LinkModel, kTransportKinds> links{};
  double gammaGBs = 4.0;        // reduction throughput (bytes of output per second), GB/s
  double callOverheadUs = 0.3;  // fixed cost of one call
  // The device executor's memory work, GB/s of output: a reduction reads two inputs and writes one
  // output, a copy reads one and writes one, both at the GPU's memory bandwidth. Defaults: an H100
  // SXM5's HBM3 (3.35 TB/s, datasheet) / 3 and / 2.
  double deviceGammaGBs = 1100;
  double deviceCopyGBs = 1650;
  // The device executor's link between hosts, per NIC (a rank's traffic to another host crosses
  // its host's NICs, TuneInput::nicsPerHost). Default: a ConnectX-7 at 400 Gb/s, 50 GB/s per
  // direction; a step is a put and a signal, each over two NICs and the fabric as tessera_sim's
  // presets model them (1 us per NIC, 0.5 us fabric): 5 us. Not measured by tessera.
  LinkModel deviceNet{5.0, 50.0};
  // The device executor's link between two GPUs of a host that only PCIe joins (no NVLink:
  // TuneInput::devicePcie), one direction. Default: PCIe 4.0 x16, 31.5 GB/s per direction by the
  // PCI-SIG's signalling rate, of which a peer copy moves about 80% (packet headers, flow
  // control): 25 GB/s; a step 3 us (a flag across the root complex and back). Not measured by
  // tessera.
  LinkModel devicePcie{3.0, 25.0};
  // Cross-memory attach between processes of a host (process_vm_readv / writev, one kernel copy
  // per piece): what zero-copy forms cost where buffers are not registered. The default keeps
  // staging preferred: on the CI machine class cross-memory all-gather, broadcast and all-reduce
  // ran at half the staged plans' busbw from 256 KiB to 64 MiB (2 processes, same run);
  // tessera_tune measures the machine's own.
  LinkModel crossMemory{2.0, 2.0};
};

// Defaults per transport for this build (host memory numbers measured on the CI machine class).
TunerParams defaultTunerParams();
// Parses TESSERA_TUNER_FILE's JSON (tsrInvalidArgument with the path of a bad field).
Result tunerParamsFromJson(const std::string& text, TunerParams* out);
// The same with its measured table (tuner_table.hpp; empty when the file has none).
Result tunerFileFromJson(const std::string& text, TunerParams* out, MeasuredTable* table);
// What tessera_tune writes: the parameters, the table and where they came from ("" without JSON
// support).
std::string tunerFileToJson(const TunerParams& params, const MeasuredTable& table,
                            const std::string& tool, const std::string& host,
                            const std::string& created);

// A parsed TESSERA_ALGO / TESSERA_PROTO value.
struct AlgoFilter {
  // Per collective: allowed[c][i] for family i of algorithms(); all true when unset.
  std::array<std::vector<bool>, kCollectiveCount> allowed;
  std::string text;  // the value parsed, for error sentences ("" when built by hand)
  // The variable `text` came from, for sentences: NCCL_ALGO when read through its alias.
  const char* var = "TESSERA_ALGO";
  // Whether it leaves out some family of collective c.
  bool restricts(Collective c) const { return !allowed[static_cast<size_t>(c)].empty(); }
};
// `var`: the variable the value came from (envSourceName), named in error sentences.
Result parseAlgoFilter(const std::string& value, AlgoFilter* out, const char* var = "TESSERA_ALGO");

// The protocols: Simple (bulk chunks + semaphores, every executor) and LL (8-byte lines of data +
// flag, device executor only, small calls; collectives/exec/device/ll.hpp).
enum class Protocol : uint8_t { kSimple = 0, kLL = 1 };
inline constexpr int kProtocolCount = 2;
const char* protocolName(Protocol p);  // "Simple", "LL"

// A parsed TESSERA_PROTO value: allowed[c][p] per collective and protocol (all true when unset).
struct ProtoFilter {
  std::array<std::array<bool, kProtocolCount>, kCollectiveCount> allowed;
  std::string text;
  ProtoFilter() {
    for (auto& a : allowed) a.fill(true);
  }
  bool allows(Collective c, Protocol p) const {
    return allowed[static_cast<size_t>(c)][static_cast<size_t>(p)];
  }
};
// tsrInvalidArgument when a collective is left neither Simple nor LL.
Result parseProtoFilter(const std::string& value, ProtoFilter* out,
                        const char* var = "TESSERA_PROTO");
Result parseProtoFilter(const std::string& value);  // validation only

struct TuneInput {
  Collective collective = Collective::kAllReduce;
  size_t bytes = 0;  // the call's message size as nccl-tests counts it (allreduce: count*size)
  int nranks = 1;
  int root = 0;
  std::vector<int> hostOf;                        // host index per rank (size nranks)
  TransportKind intraHost = TransportKind::kShm;  // slowest transport within a host
  TransportKind interHost = TransportKind::kUcx;
  bool zeroCopyPossible = false;  // every rank's buffers are registered and mapped
  // With zeroCopyPossible: the peers' buffers are reached by cross-memory attach, so a zero-copy
  // form's remote moves cost TunerParams::crossMemory instead of the intra-host link. Where the
  // measured table applies, its crossUs decides (choose() returns a zero-copy choice only where
  // cross-memory attach was measured faster than the staged choice).
  bool crossMemory = false;
  // Ignore the measured table (a comparison between two modelled costs).
  bool modelOnly = false;
  bool deterministic = false;
  // The call runs on the device executor (the only one with the LL protocol). Host calls leave it
  // false and always get Simple.
  bool deviceExecutor = false;
  // The scratch a staged plan slices the call through (bytes per plan and rank); 0: not modelled.
  // A staged plan runs once per slice (DESIGN.md, "The slice rule"), each iteration paying its
  // steps' latencies: the model charges ceil(segment / slice) iterations of the family, the slice
  // from the family's own plan (tuner.cpp, sliceShare). Set for device calls, whose scratch is
  // sized for the GPU; the host executor's choices are calibrated without it.
  uint64_t scratchBytes = 0;
  // The device executor's CTAs (its grid). The planner gives the device ring one ring per CTA,
  // each with a piece of every block (exec planKeyOf), so the model prices the ring as that many
  // concurrent streams with a pipeline of at least as many pieces. 1: one stream (host calls).
  int workers = 1;
  // Device calls: NICs per host that the ranks' traffic between hosts spreads over (rails; the
  // fewest any host of the call has, at most its ranks; 0 or 1: one). Host calls: unused (their
  // inter-host link is the host's).
  int nicsPerHost = 1;
  // Device calls: some pair of GPUs of a host that the call joins has no NVLink (PCIe only), so
  // the intra-host link is TunerParams::devicePcie rather than the device transport's (NVLink).
  bool devicePcie = false;
};

struct TuneChoice {
  std::string algorithm;
  int pipeline = 1;
  int workers = 1;
  bool zeroCopy = false;
  double predictedUs = 0;
  bool measured = false;  // the family came from the measured table, not the model
  // kLL: the device executor runs the call with LL (DeviceExecutor::enqueueLL); `algorithm` and
  // the rest still name the best Simple plan, the fallback where LL turns out not to run.
  Protocol protocol = Protocol::kSimple;
};

// Where tessera_tune writes this host's tuner file and communicators look for it when
// TESSERA_TUNER_FILE is unset: $XDG_CACHE_HOME/tessera/tuner-<host name>.json, else
// $HOME/.cache/tessera/...; "" when neither variable is set.
std::string tunerCachePath();

class Tuner {
 public:
  // Reads TESSERA_ALGO, TESSERA_PROTO, TESSERA_DETERMINISTIC and TESSERA_TUNER_FILE, or, without
  // the last, this host's cached tuner file (tunerCachePath(), unless TESSERA_TUNER_CACHE=0): a
  // cached file that does not parse is ignored with a warning (it is the tool's, not the user's),
  // a TESSERA_TUNER_FILE that does not parse is an error.
  static Result fromEnv(Tuner* out);
  Tuner() : params_(defaultTunerParams()) {}
  Tuner(TunerParams params, AlgoFilter filter, ProtoFilter proto = {})
      : params_(params), filter_(std::move(filter)), proto_(std::move(proto)) {}
  // The same with a measured table (tuner_table.hpp).
  Tuner(TunerParams params, std::shared_ptr<const MeasuredTable> table, AlgoFilter filter,
        ProtoFilter proto = {});

  // The cheapest allowed family for the input (a family that does not apply, e.g. hier on one
  // host, or oneshot for a collective it does not generate, is skipped). tsrInvalidUsage naming
  // the filter when nothing is allowed.
  Result choose(const TuneInput& in, TuneChoice* out) const;
  // Predicted time of one family, for logs and tests; a negative value when it does not apply.
  double predictUs(const TuneInput& in, const std::string& algorithm, int pipeline) const;
  // Predicted time of the call with LL; negative when LL does not apply (host executor, a size or
  // collective llSupports refuses, several hosts, an unmapped intra-host transport).
  double predictLLUs(const TuneInput& in) const;

  const TunerParams& params() const { return params_; }
  bool deterministicDefault() const { return deterministic_; }
  const ProtoFilter& proto() const { return proto_; }
  const AlgoFilter& filter() const { return filter_; }
  // The measured table, or null.
  const MeasuredTable* table() const { return table_.get(); }
  // Where the parameters came from: "built-in defaults", or the file's path.
  const std::string& source() const { return source_; }
  // Digests of what the tuner decides from: its parameters and table (the file), and its
  // filters (TESSERA_ALGO, TESSERA_PROTO, TESSERA_DETERMINISTIC). Ranks compare them, so that
  // every rank picks the same plans.
  uint64_t fileDigest() const;
  uint64_t filterDigest() const;
  // Back to the built-in parameters, without a table (the ranks' files differ).
  void useDefaults();

 private:
  TunerParams params_;
  std::shared_ptr<const MeasuredTable> table_;
  std::string source_ = "built-in defaults";
  AlgoFilter filter_;
  ProtoFilter proto_;
  bool deterministic_ = false;
};

}  // namespace tessera
