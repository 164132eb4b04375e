// The workload graph's checks and its JSON format (workload.hpp).
#include "workload/workload.hpp"

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/build_config.hpp"
#include "core/log.hpp"
#include "core/text_file.hpp"

#if TESSERA_HAVE_JSON
#include <nlohmann/json.hpp>
#endif

namespace tessera::workload {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

const char* kindName(const Op& op) {
  switch (op.kind) {
    case OpKind::kGemm: return "gemm";
    case OpKind::kMemory: return "memory";
    case OpKind::kAttention: return "attention";
    case OpKind::kCollective: return collectiveName(op.collective);
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kFused: return fusedKindName(op.fused);
    case OpKind::kDelay: return "delay";
  }
  return "?";
}

bool fusedParse(const std::string& s, FusedKind* out) {
  for (FusedKind k :
       {FusedKind::kGemmReduceScatter, FusedKind::kAllGatherGemm, FusedKind::kGemmAllReduce}) {
    if (s == fusedKindName(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* fusedKindName(FusedKind k) {
  switch (k) {
    case FusedKind::kGemmReduceScatter: return "gemm_rs";
    case FusedKind::kAllGatherGemm: return "ag_gemm";
    case FusedKind::kGemmAllReduce: return "gemm_ar";
  }
  return "?";
}

int Workload::totalGpus() const {
  if (gpus > 0) return gpus;
  double sum = 0;
  for (const Rank& r : ranks) sum += r.weight;
  return static_cast<int>(std::lround(sum));
}

uint16_t streamOf(Rank& r, const std::string& name) {
  for (size_t i = 0; i < r.streams.size(); ++i)
    if (r.streams[i] == name) return static_cast<uint16_t>(i);
  r.streams.push_back(name);
  return static_cast<uint16_t>(r.streams.size() - 1);
}

Result checkWorkload(const Workload& w, const std::string& source) {
  const char* src = source.c_str();
  if (w.ranks.empty()) return TSR_FAIL(tsrInvalidArgument, "%s: the workload has no ranks", src);
  if (w.ranks.size() > kMaxWorkloadRanks)
    return TSR_FAIL(tsrInvalidArgument, "%s: %zu ranks, more than %zu", src, w.ranks.size(),
                    kMaxWorkloadRanks);
  if (w.nodes < 1) return TSR_FAIL(tsrInvalidArgument, "%s: nodes must be at least 1", src);
  const int n = static_cast<int>(w.ranks.size());
  for (size_t g = 0; g < w.groups.size(); ++g) {
    const Group& gr = w.groups[g];
    if (gr.members.empty())
      return TSR_FAIL(tsrInvalidArgument, "%s: group \"%s\" has no ranks", src, gr.name.c_str());
    std::set<int32_t> seen;
    for (int32_t m : gr.members) {
      if (m < 0 || m >= n)
        return TSR_FAIL(tsrInvalidArgument, "%s: group \"%s\" names rank %d of %d", src,
                        gr.name.c_str(), m, n);
      if (!seen.insert(m).second)
        return TSR_FAIL(tsrInvalidArgument, "%s: group \"%s\" names rank %d twice", src,
                        gr.name.c_str(), m);
    }
    if (gr.size < static_cast<int>(gr.members.size()) || gr.nodes < 1 || gr.nodes > gr.size)
      return TSR_FAIL(tsrInvalidArgument,
                      "%s: group \"%s\": size %d and nodes %d do not fit its %zu ranks", src,
                      gr.name.c_str(), gr.size, gr.nodes, gr.members.size());
  }
  for (int r = 0; r < n; ++r) {
    const Rank& rk = w.ranks[static_cast<size_t>(r)];
    if (!(rk.weight >= 1) || !std::isfinite(rk.weight))
      return TSR_FAIL(tsrInvalidArgument, "%s: rank %d: weight must be at least 1", src, r);
    if (rk.gpu < 0)
      return TSR_FAIL(tsrInvalidArgument, "%s: rank %d: gpu must not be negative", src, r);
    if (rk.ops.size() > kMaxOpsPerRank)
      return TSR_FAIL(tsrInvalidArgument, "%s: rank %d: more than %zu ops", src, r, kMaxOpsPerRank);
    const size_t nops = rk.ops.size();
    std::vector<uint32_t> indegree(nops, 0);
    std::vector<std::vector<uint32_t>> next(nops);
    std::vector<int64_t> lastOnStream(rk.streams.size(), -1);
    for (size_t i = 0; i < nops; ++i) {
      const Op& op = rk.ops[i];
      const char* id = op.id.c_str();
      if (op.stream >= rk.streams.size())
        return TSR_FAIL(tsrInvalidArgument, "%s: rank %d op \"%s\": stream %u of %zu", src, r, id,
                        op.stream, rk.streams.size());
      auto edge = [&](size_t from) {
        next[from].push_back(static_cast<uint32_t>(i));
        ++indegree[i];
      };
      if (lastOnStream[op.stream] >= 0) edge(static_cast<size_t>(lastOnStream[op.stream]));
      lastOnStream[op.stream] = static_cast<int64_t>(i);
      for (uint32_t a : op.after) {
        if (a >= nops)
          return TSR_FAIL(tsrInvalidArgument, "%s: rank %d op \"%s\": after names op %u of %zu",
                          src, r, id, a, nops);
        if (a == i)
          return TSR_FAIL(tsrInvalidArgument, "%s: rank %d op \"%s\" waits for itself", src, r, id);
        edge(a);
      }
      bool bad = false;
      switch (op.kind) {
        case OpKind::kGemm:
        case OpKind::kFused:
          bad = op.gemm.m == 0 || op.gemm.n == 0 || op.gemm.k == 0 || op.gemm.batch == 0;
          break;
        case OpKind::kMemory: bad = !(op.bytes > 0) || !std::isfinite(op.bytes); break;
        case OpKind::kAttention:
          bad = !(op.flops >= 0 && op.bytes >= 0 && op.flops + op.bytes > 0) ||
                !std::isfinite(op.flops + op.bytes);
          break;
        case OpKind::kCollective:
        case OpKind::kSend:
        case OpKind::kRecv: bad = !(op.bytes >= 0) || !std::isfinite(op.bytes); break;
        case OpKind::kDelay: bad = !(op.us >= 0) || !std::isfinite(op.us); break;
      }
      if (bad)
        return TSR_FAIL(tsrInvalidArgument,
                        "%s: rank %d op \"%s\" (%s): a size is missing, zero "
                        "or not finite",
                        src, r, id, kindName(op));
      if (op.kind == OpKind::kCollective || op.kind == OpKind::kFused) {
        if (op.group < 0 || static_cast<size_t>(op.group) >= w.groups.size())
          return TSR_FAIL(tsrInvalidArgument, "%s: rank %d op \"%s\" names no group", src, r, id);
        bool member = false;
        for (int32_t m : w.groups[static_cast<size_t>(op.group)].members) member |= m == r;
        if (!member)
          return TSR_FAIL(tsrInvalidArgument,
                          "%s: rank %d op \"%s\": rank %d is not in group "
                          "\"%s\"",
                          src, r, id, r, w.groups[static_cast<size_t>(op.group)].name.c_str());
        if (op.kind == OpKind::kFused && w.groups[static_cast<size_t>(op.group)].nodes != 1)
          return TSR_FAIL(tsrInvalidArgument,
                          "%s: rank %d op \"%s\": fused operations run inside "
                          "one node (the fused layer's peers are NVLink peers)",
                          src, r, id);
        if (op.kind == OpKind::kFused &&
            op.gemm.m % static_cast<uint64_t>(w.groups[static_cast<size_t>(op.group)].size) != 0)
          return TSR_FAIL(tsrInvalidArgument,
                          "%s: rank %d op \"%s\": m is not a multiple of the "
                          "group's size",
                          src, r, id);
      }
      if ((op.kind == OpKind::kSend || op.kind == OpKind::kRecv) &&
          (op.peer < 0 || op.peer >= n || op.peer == r))
        return TSR_FAIL(tsrInvalidArgument, "%s: rank %d op \"%s\": peer %d is not another rank",
                        src, r, id, op.peer);
    }
    // Kahn's order: whatever is left is on a cycle.
    std::vector<uint32_t> ready;
    for (size_t i = 0; i < nops; ++i)
      if (indegree[i] == 0) ready.push_back(static_cast<uint32_t>(i));
    size_t done = 0;
    while (!ready.empty()) {
      uint32_t i = ready.back();
      ready.pop_back();
      ++done;
      for (uint32_t j : next[i])
        if (--indegree[j] == 0) ready.push_back(j);
    }
    if (done != nops) {
      for (size_t i = 0; i < nops; ++i)
        if (indegree[i] != 0)
          return TSR_FAIL(tsrInvalidArgument,
                          "%s: rank %d: the ops form a cycle (op \"%s\" waits, through `after` "
                          "and its stream's order, for itself)",
                          src, r, rk.ops[i].id.c_str());
    }
  }
  return tsrSuccess;
}

#if TESSERA_HAVE_JSON
namespace {
using json = nlohmann::json;

struct Reader {
  const std::string& src;
  Result fail(const std::string& where, const std::string& what) const {
    return TSR_FAIL(tsrInvalidArgument, "%s: %s: %s", src.c_str(), where.c_str(), what.c_str());
  }
  Result keys(const json& o, const std::string& where, std::initializer_list<const char*> ok) {
    if (!o.is_object()) return fail(where, "expected an object");
    for (auto it = o.begin(); it != o.end(); ++it) {
      bool known = false;
      for (const char* k : ok) known |= it.key() == k;
      if (!known) return fail(where, "unknown field \"" + it.key() + "\"");
    }
    return tsrSuccess;
  }
  Result number(const json& o, const std::string& where, const char* key, double lo, double hi,
                double* out, bool required) {
    if (!o.contains(key)) {
      if (required) return fail(where, std::string("missing field \"") + key + "\"");
      return tsrSuccess;
    }
    const json& v = o[key];
    if (!v.is_number()) return fail(where, std::string("\"") + key + "\" must be a number");
    double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      std::ostringstream s;
      s << "\"" << key << "\" = " << d << " is outside " << lo << ".." << hi;
      return fail(where, s.str());
    }
    *out = d;
    return tsrSuccess;
  }
  Result integer(const json& o, const std::string& where, const char* key, double lo, double hi,
                 uint64_t* out, bool required) {
    double d = static_cast<double>(*out);
    TSR_CHECK(number(o, where, key, lo, hi, &d, required));
    if (o.contains(key) && !o[key].is_number_integer())
      return fail(where, std::string("\"") + key + "\" must be an integer");
    *out = static_cast<uint64_t>(d);
    return tsrSuccess;
  }
  Result string(const json& o, const std::string& where, const char* key, std::string* out,
                bool required) {
    if (!o.contains(key)) {
      if (required) return fail(where, std::string("missing field \"") + key + "\"");
      return tsrSuccess;
    }
    if (!o[key].is_string()) return fail(where, std::string("\"") + key + "\" must be a string");
    *out = o[key].get<std::string>();
    return tsrSuccess;
  }
};

constexpr double kMaxDim = 1e9;     // a GEMM dimension
constexpr double kMaxBytes = 1e15;  // a petabyte
constexpr double kMaxFlops = 1e21;

}  // namespace

Result workloadFromJson(const std::string& text, const std::string& source, Workload* out) {
  Reader rd{source};
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return rd.fail("the file", "not JSON");
  TSR_CHECK(rd.keys(doc, "the workload",
                    {"format", "version", "name", "gpu", "platform", "nodes", "gpus", "model_flops",
                     "groups", "ranks"}));
  std::string format;
  TSR_CHECK(rd.string(doc, "the workload", "format", &format, true));
  if (format != "tessera-workload")
    return rd.fail("the workload", "\"format\" must be \"tessera-workload\"");
  uint64_t version = 0;
  TSR_CHECK(rd.integer(doc, "the workload", "version", 1, 1, &version, true));
  Workload w;
  TSR_CHECK(rd.string(doc, "the workload", "name", &w.name, false));
  TSR_CHECK(rd.string(doc, "the workload", "gpu", &w.gpu, false));
  TSR_CHECK(rd.string(doc, "the workload", "platform", &w.platform, false));
  uint64_t nodes = 1, gpus = 0;
  TSR_CHECK(rd.integer(doc, "the workload", "nodes", 1, 16384, &nodes, false));
  TSR_CHECK(rd.integer(doc, "the workload", "gpus", 0, 1 << 20, &gpus, false));
  w.nodes = static_cast<int>(nodes);
  w.gpus = static_cast<int>(gpus);
  TSR_CHECK(rd.number(doc, "the workload", "model_flops", 0, 1e30, &w.modelFlops, false));
  std::map<std::string, int32_t> groupIndex;
  if (doc.contains("groups")) {
    if (!doc["groups"].is_array()) return rd.fail("the workload", "\"groups\" must be an array");
    for (size_t g = 0; g < doc["groups"].size(); ++g) {
      const json& o = doc["groups"][g];
      std::string where = "group " + std::to_string(g);
      TSR_CHECK(rd.keys(o, where, {"name", "ranks", "size", "nodes"}));
      Group gr;
      TSR_CHECK(rd.string(o, where, "name", &gr.name, true));
      if (!groupIndex.emplace(gr.name, static_cast<int32_t>(g)).second)
        return rd.fail(where, "the name \"" + gr.name + "\" is taken by another group");
      if (!o.contains("ranks") || !o["ranks"].is_array())
        return rd.fail(where, "\"ranks\" must be an array of rank indices");
      for (const json& m : o["ranks"]) {
        if (!m.is_number_integer() || m.get<int64_t>() < 0 ||
            m.get<int64_t>() >= static_cast<int64_t>(kMaxWorkloadRanks))
          return rd.fail(where, "\"ranks\" must be an array of rank indices");
        gr.members.push_back(static_cast<int32_t>(m.get<int64_t>()));
      }
      uint64_t size = gr.members.size(), span = 0;
      TSR_CHECK(rd.integer(o, where, "size", 1, 1 << 20, &size, false));
      TSR_CHECK(rd.integer(o, where, "nodes", 1, 16384, &span, false));
      gr.size = static_cast<int>(size);
      gr.nodes = static_cast<int>(span);  // 0: from the members' GPUs, below
      w.groups.push_back(gr);
    }
  }
  if (!doc.contains("ranks") || !doc["ranks"].is_array())
    return rd.fail("the workload", "\"ranks\" must be an array");
  for (size_t r = 0; r < doc["ranks"].size(); ++r) {
    const json& o = doc["ranks"][r];
    std::string where = "rank " + std::to_string(r);
    TSR_CHECK(rd.keys(o, where, {"gpu", "weight", "ops"}));
    Rank rk;
    uint64_t gpu = r;
    TSR_CHECK(rd.integer(o, where, "gpu", 0, 1 << 20, &gpu, false));
    rk.gpu = static_cast<int>(gpu);
    TSR_CHECK(rd.number(o, where, "weight", 1, 1 << 20, &rk.weight, false));
    if (!o.contains("ops") || !o["ops"].is_array())
      return rd.fail(where, "\"ops\" must be an array");
    std::unordered_map<std::string, uint32_t> ids;
    std::vector<std::vector<std::string>> afters;
    for (size_t i = 0; i < o["ops"].size(); ++i) {
      const json& j = o["ops"][i];
      std::string at = where + " op " + std::to_string(i);
      if (!j.is_object()) return rd.fail(at, "expected an object");
      Op op;
      std::string kind, stream;
      TSR_CHECK(rd.string(j, at, "op", &kind, true));
      TSR_CHECK(rd.string(j, at, "id", &op.id, false));
      if (op.id.empty()) op.id = "op" + std::to_string(i);
      at = where + " op \"" + op.id + "\"";
      if (!ids.emplace(op.id, static_cast<uint32_t>(i)).second)
        return rd.fail(at, "the id is taken by another op of the rank");
      Collective c = Collective::kAllReduce;
      bool isCollective = false;
      for (int ci = 0; ci < kCollectiveCount && !isCollective; ++ci) {
        c = static_cast<Collective>(ci);
        isCollective = kind == collectiveName(c);
      }
      std::string dtype;
      const char* defaultStream = "compute";
      if (kind == "gemm" || fusedParse(kind, &op.fused)) {
        op.kind = kind == "gemm" ? OpKind::kGemm : OpKind::kFused;
        TSR_CHECK(rd.keys(
            j, at, {"op", "id", "stream", "after", "m", "n", "k", "batch", "dtype", "group"}));
        TSR_CHECK(rd.integer(j, at, "m", 1, kMaxDim, &op.gemm.m, true));
        TSR_CHECK(rd.integer(j, at, "n", 1, kMaxDim, &op.gemm.n, true));
        TSR_CHECK(rd.integer(j, at, "k", 1, kMaxDim, &op.gemm.k, true));
        TSR_CHECK(rd.integer(j, at, "batch", 1, kMaxDim, &op.gemm.batch, false));
        TSR_CHECK(rd.string(j, at, "dtype", &dtype, false));
        if (!dtype.empty() && dtypeParse(dtype, &op.gemm.dtype) != tsrSuccess)
          return rd.fail(at, lastErrorMessage());
      } else if (kind == "memory") {
        op.kind = OpKind::kMemory;
        TSR_CHECK(rd.keys(j, at, {"op", "id", "stream", "after", "bytes"}));
        TSR_CHECK(rd.number(j, at, "bytes", 1, kMaxBytes, &op.bytes, true));
      } else if (kind == "attention") {
        op.kind = OpKind::kAttention;
        TSR_CHECK(rd.keys(j, at, {"op", "id", "stream", "after", "flops", "bytes", "dtype"}));
        TSR_CHECK(rd.number(j, at, "flops", 0, kMaxFlops, &op.flops, true));
        TSR_CHECK(rd.number(j, at, "bytes", 0, kMaxBytes, &op.bytes, true));
        TSR_CHECK(rd.string(j, at, "dtype", &dtype, false));
        if (!dtype.empty() && dtypeParse(dtype, &op.gemm.dtype) != tsrSuccess)
          return rd.fail(at, lastErrorMessage());
      } else if (isCollective) {
        op.kind = OpKind::kCollective;
        op.collective = c;
        defaultStream = "comm";
        TSR_CHECK(rd.keys(j, at, {"op", "id", "stream", "after", "group", "bytes"}));
        TSR_CHECK(rd.number(j, at, "bytes", 0, kMaxBytes, &op.bytes, true));
      } else if (kind == "send" || kind == "recv") {
        op.kind = kind == "send" ? OpKind::kSend : OpKind::kRecv;
        defaultStream = "comm";
        TSR_CHECK(rd.keys(j, at, {"op", "id", "stream", "after", "peer", "bytes"}));
        uint64_t peer = 0;
        TSR_CHECK(rd.integer(j, at, "peer", 0, kMaxWorkloadRanks, &peer, true));
        op.peer = static_cast<int32_t>(peer);
        TSR_CHECK(rd.number(j, at, "bytes", 0, kMaxBytes, &op.bytes, true));
      } else if (kind == "delay") {
        op.kind = OpKind::kDelay;
        TSR_CHECK(rd.keys(j, at, {"op", "id", "stream", "after", "us"}));
        TSR_CHECK(rd.number(j, at, "us", 0, 1e12, &op.us, true));
      } else {
        return rd.fail(at, "unknown op \"" + kind +
                               "\" (gemm, memory, attention, a collective, send, recv, gemm_rs, "
                               "ag_gemm, gemm_ar, delay)");
      }
      if (op.kind == OpKind::kCollective || op.kind == OpKind::kFused) {
        std::string group;
        TSR_CHECK(rd.string(j, at, "group", &group, true));
        auto it = groupIndex.find(group);
        if (it == groupIndex.end()) return rd.fail(at, "no group is named \"" + group + "\"");
        op.group = it->second;
      }
      stream = defaultStream;
      TSR_CHECK(rd.string(j, at, "stream", &stream, false));
      op.stream = streamOf(rk, stream);
      std::vector<std::string> after;
      if (j.contains("after")) {
        if (!j["after"].is_array()) return rd.fail(at, "\"after\" must be an array of op ids");
        for (const json& a : j["after"]) {
          if (!a.is_string()) return rd.fail(at, "\"after\" must be an array of op ids");
          after.push_back(a.get<std::string>());
        }
      }
      afters.push_back(std::move(after));
      rk.ops.push_back(std::move(op));
    }
    for (size_t i = 0; i < rk.ops.size(); ++i) {
      for (const std::string& a : afters[i]) {
        auto it = ids.find(a);
        if (it == ids.end())
          return rd.fail(where + " op \"" + rk.ops[i].id + "\"",
                         "\"after\" names \"" + a + "\", which is no op of the rank");
        rk.ops[i].after.push_back(it->second);
      }
    }
    w.ranks.push_back(std::move(rk));
  }
  // A group's node span, where the file does not say it: the nodes of its members' GPUs.
  for (Group& g : w.groups) {
    if (g.nodes > 0) continue;
    std::set<int> nodesOf;
    for (int32_t m : g.members)
      if (m >= 0 && static_cast<size_t>(m) < w.ranks.size())
        nodesOf.insert(w.ranks[static_cast<size_t>(m)].gpu / kPresetGpusPerNode);
    g.nodes = std::max<int>(1, static_cast<int>(nodesOf.size()));
  }
  TSR_CHECK(checkWorkload(w, source));
  *out = std::move(w);
  return tsrSuccess;
}

std::string workloadToJson(const Workload& w) {
  json doc;
  doc["format"] = "tessera-workload";
  doc["version"] = 1;
  doc["name"] = w.name;
  doc["gpu"] = w.gpu;
  doc["platform"] = w.platform;
  doc["nodes"] = w.nodes;
  if (w.gpus > 0) doc["gpus"] = w.gpus;
  if (w.modelFlops > 0) doc["model_flops"] = w.modelFlops;
  doc["groups"] = json::array();
  for (const Group& g : w.groups)
    doc["groups"].push_back(
        {{"name", g.name}, {"ranks", g.members}, {"size", g.size}, {"nodes", g.nodes}});
  doc["ranks"] = json::array();
  for (const Rank& r : w.ranks) {
    json ops = json::array();
    for (const Op& op : r.ops) {
      json j;
      j["id"] = op.id;
      j["op"] = kindName(op);
      j["stream"] = r.streams[op.stream];
      if (!op.after.empty()) {
        json a = json::array();
        for (uint32_t i : op.after) a.push_back(r.ops[i].id);
        j["after"] = a;
      }
      switch (op.kind) {
        case OpKind::kGemm:
        case OpKind::kFused:
          j["m"] = op.gemm.m;
          j["n"] = op.gemm.n;
          j["k"] = op.gemm.k;
          if (op.gemm.batch != 1) j["batch"] = op.gemm.batch;
          j["dtype"] = dtypeName(op.gemm.dtype);
          if (op.kind == OpKind::kFused) j["group"] = w.groups[static_cast<size_t>(op.group)].name;
          break;
        case OpKind::kMemory: j["bytes"] = op.bytes; break;
        case OpKind::kAttention:
          j["flops"] = op.flops;
          j["bytes"] = op.bytes;
          j["dtype"] = dtypeName(op.gemm.dtype);
          break;
        case OpKind::kCollective:
          j["group"] = w.groups[static_cast<size_t>(op.group)].name;
          j["bytes"] = op.bytes;
          break;
        case OpKind::kSend:
        case OpKind::kRecv:
          j["peer"] = op.peer;
          j["bytes"] = op.bytes;
          break;
        case OpKind::kDelay: j["us"] = op.us; break;
      }
      ops.push_back(j);
    }
    doc["ranks"].push_back({{"gpu", r.gpu}, {"weight", r.weight}, {"ops", ops}});
  }
  return doc.dump(1) + "\n";
}
#else
Result workloadFromJson(const std::string&, const std::string& source, Workload*) {
  return TSR_FAIL(tsrInvalidUsage, "%s: JSON support was not built in", source.c_str());
}
std::string workloadToJson(const Workload&) { return "{}\n"; }
#endif

Result readWorkloadFile(const std::string& path, Workload* out) {
  std::string text;
  TSR_CHECK(readTextFile(path, "the workload file", &text));
  return workloadFromJson(text, path, out);
}

}  // namespace tessera::workload
