// Plans as JSON (plan_json.hpp). Reading: size and nesting are checked on the raw text first (so
// a hostile "[[[[..." cannot exhaust the parser's stack), then nlohmann-json parses without
// exceptions, then every field is type-checked before it is read, with its JSON path in the
// error. Writing: one canonical layout (fixed key order, one op per line), so text written by
// planToJson reads back and writes out byte for byte the same.
#include "collectives/plan/plan_json.hpp"

#include "core/build_config.hpp"

#if TESSERA_HAVE_JSON
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "collectives/plan/plan_json_read.hpp"
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}  // namespace

std::string showPlan(const Plan& p) {
  std::string s =
      strprintf("%s %s (%s): %d ranks, chunksPerSegment %d", collectiveName(p.collective),
                p.algorithm.c_str(), p.name.c_str(), p.nranks, p.chunksPerSegment);
  if (collectiveHasRoot(p.collective)) s += strprintf(", root %d", p.root);
  if (p.zeroCopy) s += ", zero-copy";
  if (p.canonicalOrder) s += ", canonical order";
  s += "\n";
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankPlan& rp = p.ranks[r];
    s += strprintf("rank %zu: scratch %d segments", r, rp.scratchSegments);
    for (const Credit& c : rp.credits) {
      s += strprintf(", credit %d from rank %d channel %d", c.initial, c.peer, c.channel);
    }
    s += "\n";
    for (size_t w = 0; w < rp.workers.size(); ++w) {
      const std::vector<Op>& ops = rp.workers[w].ops;
      s += strprintf("  worker %zu (%zu ops)\n", w, ops.size());
      for (size_t i = 0; i < ops.size(); ++i) {
        s += strprintf("    %4zu  %s\n", i, describeOp(ops[i]).c_str());
      }
    }
  }
  return s;
}

#if !TESSERA_HAVE_JSON

namespace {
Result noJson() {
  return TSR_FAIL(tsrInvalidUsage,
                  "built without JSON support (nlohmann-json not found at configure time)");
}
}  // namespace

bool planJsonAvailable() { return false; }
Result planFromJson(const std::string&, const std::string&, Plan*) { return noJson(); }
Result planToJson(const Plan&, std::string*, bool) { return noJson(); }
Result readPlanFile(const std::string&, Plan*) { return noJson(); }
Result writePlanFile(const Plan&, const std::string&) { return noJson(); }

#else  // TESSERA_HAVE_JSON

namespace {

using OJson = nlohmann::ordered_json;

constexpr size_t kMaxDocumentBytes = size_t{32} << 20;

std::string dumpScalar(const OJson& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

OJson refJson(const ChunkRef& r) {
  OJson j = OJson::object();
  if (r.remote()) j["rank"] = r.rank;
  j["buffer"] = bufferName(r.buffer);
  j["index"] = r.index;
  if (r.count != 1) j["count"] = r.count;
  return j;
}

OJson opJson(const Op& op) {
  OJson j = OJson::object();
  j["op"] = opName(op.code);
  switch (op.code) {
    case OpCode::kPut:
    case OpCode::kGet:
    case OpCode::kCopy:
      j["src"] = op.srcs.empty() ? OJson::object() : refJson(op.srcs[0]);
      j["dst"] = refJson(op.dst);
      if (op.hasDst2) j["dst2"] = refJson(op.dst2);
      break;
    case OpCode::kReduce:
    case OpCode::kReduceSend: {
      OJson srcs = OJson::array();
      for (const ChunkRef& r : op.srcs) srcs.push_back(refJson(r));
      j["srcs"] = std::move(srcs);
      j["dst"] = refJson(op.dst);
      if (op.hasDst2) j["dst2"] = refJson(op.dst2);
      break;
    }
    case OpCode::kSignal:
    case OpCode::kWait:
      j["peer"] = op.peer;
      j["channel"] = op.channel;
      break;
    case OpCode::kFlush: j["peer"] = op.peer; break;
    case OpCode::kBarrier: break;
  }
  return j;
}

OJson planJson(const Plan& p) {
  OJson j = OJson::object();
  j["format"] = "tessera-plan";
  j["version"] = 1;
  j["name"] = p.name;
  j["collective"] = collectiveName(p.collective);
  j["algorithm"] = p.algorithm;
  j["nranks"] = p.nranks;
  j["root"] = p.root;
  j["chunksPerSegment"] = p.chunksPerSegment;
  j["zeroCopy"] = p.zeroCopy;
  j["canonicalOrder"] = p.canonicalOrder;
  OJson ranks = OJson::array();
  for (const RankPlan& rp : p.ranks) {
    OJson r = OJson::object();
    r["scratchSegments"] = rp.scratchSegments;
    OJson credits = OJson::array();
    for (const Credit& c : rp.credits) {
      credits.push_back(OJson{{"peer", c.peer}, {"channel", c.channel}, {"initial", c.initial}});
    }
    r["credits"] = std::move(credits);
    OJson workers = OJson::array();
    for (const Worker& w : rp.workers) {
      OJson ops = OJson::array();
      for (const Op& op : w.ops) ops.push_back(opJson(op));
      workers.push_back(OJson{{"ops", std::move(ops)}});
    }
    r["workers"] = std::move(workers);
    ranks.push_back(std::move(r));
  }
  j["ranks"] = std::move(ranks);
  return j;
}

// Ops, credits and refs stay on one line each; the structure around them is indented.
bool oneLine(const OJson& j) {
  return !j.is_structured() || j.empty() ||
         (j.is_object() && (j.contains("op") || j.contains("peer") || j.contains("buffer")));
}

void emitInline(const OJson& j, std::string& out) {
  if (!j.is_structured()) {
    out += dumpScalar(j);
    return;
  }
  bool obj = j.is_object();
  out += obj ? "{" : "[";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ", ";
    first = false;
    if (obj) out += dumpScalar(OJson(it.key())) + ": ";
    emitInline(*it, out);
  }
  out += obj ? "}" : "]";
}

void emitPretty(const OJson& j, size_t indent, std::string& out) {
  if (oneLine(j)) {
    emitInline(j, out);
    return;
  }
  bool obj = j.is_object();
  out += obj ? "{\n" : "[\n";
  size_t i = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++i) {
    out.append(indent + 2, ' ');
    if (obj) out += dumpScalar(OJson(it.key())) + ": ";
    emitPretty(*it, indent + 2, out);
    out += i + 1 < j.size() ? ",\n" : "\n";
  }
  out.append(indent, ' ');
  out += obj ? "}" : "]";
}

Result systemFail(const char* what, const std::string& path, int err) {
  return TSR_FAIL(tsrSystemError, "%s: %s failed: %s", path.c_str(), what, std::strerror(err));
}

}  // namespace

bool planJsonAvailable() { return true; }

Result planToJson(const Plan& plan, std::string* out, bool pretty) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "planToJson: out is null");
  TSR_CHECK(checkPlanShape(plan));
  OJson j = planJson(plan);
  if (pretty) {
    out->clear();
    emitPretty(j, 0, *out);
    *out += "\n";
  } else {
    *out = dumpScalar(j);
  }
  return tsrSuccess;
}

Result planFromJson(const std::string& text, const std::string& source, Plan* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "planFromJson: out is null");
  if (text.size() > kMaxDocumentBytes) {
    return TSR_FAIL(tsrInvalidArgument, "%s: document of %zu bytes (at most %zu)", source.c_str(),
                    text.size(), kMaxDocumentBytes);
  }
  TSR_CHECK(jsonread::checkNesting(text, source));
  return jsonread::readPlan(text, source, out);
}

Result readPlanFile(const std::string& path, Plan* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return systemFail("open", path, errno);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) return systemFail("seek", path, errno);
  if (static_cast<uint64_t>(size) > kMaxDocumentBytes) {
    return TSR_FAIL(tsrInvalidArgument, "%s: file of %lld bytes (at most %zu)", path.c_str(),
                    static_cast<long long>(size), kMaxDocumentBytes);
  }
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return systemFail("read", path, errno);
  return planFromJson(text, path, out);
}

Result writePlanFile(const Plan& plan, const std::string& path) {
  std::string text;
  TSR_CHECK(planToJson(plan, &text, true));
  // A temporary name in the same directory, so the rename is atomic (same file system).
  static std::atomic<unsigned> counter{0};
  std::string tmp =
      strprintf("%s.tmp.%d.%u", path.c_str(), static_cast<int>(getpid()), counter.fetch_add(1));
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return systemFail("create", tmp, errno);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = errno;
  if (std::fflush(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && fsync(fileno(f)) != 0) {
    ok = false;
    err = errno;
  }
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return systemFail("write", tmp, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    return systemFail("rename to", path, err);
  }
  return tsrSuccess;
}

#endif  // TESSERA_HAVE_JSON

}  // namespace tessera
