// Reading a plan from JSON text (plan_json_read.hpp). Never trusts the text: no exceptions are
// thrown (nlohmann-json parses in its no-throw mode and every value's type is checked before it
// is read), unknown fields are errors, and every sentence names the JSON path.
#include "collectives/plan/plan_json_read.hpp"

#include "core/build_config.hpp"

#if TESSERA_HAVE_JSON

#include <cstdarg>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>

#include "collectives/plan/plan_shape.hpp"

namespace tessera::jsonread {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
constexpr int kMaxDepth = 64;

using Json = nlohmann::json;

// Finds where and why the text is not JSON (only called once parsing failed).
class ErrorFinder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    position_ = position;
    why_ = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> from "parse".
    size_t at = why_.find("] ");
    if (at != std::string::npos) why_ = why_.substr(at + 2);
    return false;
  }
  size_t position_ = 0;
  std::string why_ = "unknown error";
};

std::string shortDump(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

const char* typeName(const Json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number_float()) return "a number";
  return j.type_name();
}

std::string child(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  Result fail(const std::string& path, const char* fmt, ...) const
      __attribute__((format(printf, 3, 4))) {
    va_list ap;
    va_start(ap, fmt);
    std::string why = vstrprintf(fmt, ap);
    va_end(ap);
    if (path.empty()) return TSR_FAIL(tsrInvalidArgument, "%s: %s", source_.c_str(), why.c_str());
    return TSR_FAIL(tsrInvalidArgument, "%s: %s: %s", source_.c_str(), path.c_str(), why.c_str());
  }

  Result object(const Json& j, const std::string& path,
                std::initializer_list<const char*> allowed) const {
    if (!j.is_object()) {
      return fail(path, "expected an object, found %s %s", typeName(j), shortDump(j).c_str());
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool known = false;
      for (const char* k : allowed) known = known || it.key() == k;
      if (!known) return fail(child(path, it.key().c_str()), "unknown field");
    }
    return tsrSuccess;
  }

  // The member `key` of object j, or null when absent (an error when `required`).
  Result member(const Json& j, const std::string& path, const char* key, bool required,
                const Json** out) const {
    auto it = j.find(key);
    *out = it == j.end() ? nullptr : &*it;
    if (*out == nullptr && required) return fail(child(path, key), "missing field");
    return tsrSuccess;
  }

  Result integer(const Json& j, const std::string& path, const char* key, bool required,
                 int32_t* out) const {
    const Json* v = nullptr;
    TSR_CHECK(member(j, path, key, required, &v));
    if (v == nullptr) return tsrSuccess;
    std::string p = child(path, key);
    if (!v->is_number_integer()) {
      return fail(p, "expected an integer, found %s", shortDump(*v).c_str());
    }
    constexpr int64_t kLo = std::numeric_limits<int32_t>::min();
    constexpr int64_t kHi = std::numeric_limits<int32_t>::max();
    bool inRange = v->is_number_unsigned() ? v->get<uint64_t>() <= static_cast<uint64_t>(kHi)
                                           : v->get<int64_t>() >= kLo && v->get<int64_t>() <= kHi;
    if (!inRange) return fail(p, "%s out of range (a 32-bit integer)", shortDump(*v).c_str());
    *out = static_cast<int32_t>(v->get<int64_t>());
    return tsrSuccess;
  }

  Result boolean(const Json& j, const std::string& path, const char* key, bool* out) const {
    const Json* v = nullptr;
    TSR_CHECK(member(j, path, key, false, &v));
    if (v == nullptr) return tsrSuccess;
    if (!v->is_boolean()) {
      return fail(child(path, key), "expected true or false, found %s", shortDump(*v).c_str());
    }
    *out = v->get<bool>();
    return tsrSuccess;
  }

  Result string(const Json& j, const std::string& path, const char* key, bool required,
                std::string* out) const {
    const Json* v = nullptr;
    TSR_CHECK(member(j, path, key, required, &v));
    if (v == nullptr) return tsrSuccess;
    if (!v->is_string()) {
      return fail(child(path, key), "expected a string, found %s", shortDump(*v).c_str());
    }
    *out = v->get<std::string>();
    return tsrSuccess;
  }

  Result array(const Json& j, const std::string& path, const char* key, bool required,
               const Json** out) const {
    TSR_CHECK(member(j, path, key, required, out));
    if (*out != nullptr && !(*out)->is_array()) {
      return fail(child(path, key), "expected an array, found %s %s", typeName(**out),
                  shortDump(**out).c_str());
    }
    return tsrSuccess;
  }

  // A name among `count` values of an enum whose names `nameOf` gives.
  template <class E, class F>
  Result name(const Json& j, const std::string& path, const char* key, bool required, int count,
              F nameOf, const char* valid, E* out) const {
    std::string s;
    bool present = j.contains(key);
    TSR_CHECK(string(j, path, key, required, &s));
    if (!present) return tsrSuccess;
    for (int i = 0; i < count; ++i) {
      if (s == nameOf(static_cast<E>(i))) {
        *out = static_cast<E>(i);
        return tsrSuccess;
      }
    }
    return fail(child(path, key), "unknown name \"%s\" (valid: %s)", s.c_str(), valid);
  }

  Result ref(const Json& j, const std::string& path, ChunkRef* out) const {
    TSR_CHECK(object(j, path, {"rank", "buffer", "index", "count"}));
    TSR_CHECK(integer(j, path, "rank", false, &out->rank));
    TSR_CHECK(name(j, path, "buffer", true, kBufferKinds, bufferName, "input, output, scratch",
                   &out->buffer));
    TSR_CHECK(integer(j, path, "index", true, &out->index));
    return integer(j, path, "count", false, &out->count);
  }

  // The optional "dst2" of a put or reduceSend.
  Result readDst2(const Json& j, const std::string& path, Op* out) const {
    const Json* dst2 = nullptr;
    TSR_CHECK(member(j, path, "dst2", false, &dst2));
    if (dst2 != nullptr) {
      out->hasDst2 = true;
      TSR_CHECK(ref(*dst2, child(path, "dst2"), &out->dst2));
    }
    return tsrSuccess;
  }

  Result op(const Json& j, const std::string& path, Op* out) const {
    if (!j.is_object()) {
      return fail(path, "expected an object, found %s %s", typeName(j), shortDump(j).c_str());
    }
    TSR_CHECK(name(j, path, "op", true, kOpCodes, opName,
                   "put, get, copy, reduce, reduceSend, signal, wait, flush, barrier", &out->code));
    switch (out->code) {
      case OpCode::kPut:
      case OpCode::kGet:
      case OpCode::kCopy: {
        if (out->code == OpCode::kPut) {
          TSR_CHECK(object(j, path, {"op", "src", "dst", "dst2"}));
        } else {
          TSR_CHECK(object(j, path, {"op", "src", "dst"}));
        }
        const Json* src = nullptr;
        TSR_CHECK(member(j, path, "src", true, &src));
        out->srcs.resize(1);
        TSR_CHECK(ref(*src, child(path, "src"), &out->srcs[0]));
        if (out->code == OpCode::kPut) TSR_CHECK(readDst2(j, path, out));
        break;
      }
      case OpCode::kReduce:
      case OpCode::kReduceSend: {
        if (out->code == OpCode::kReduce) {
          TSR_CHECK(object(j, path, {"op", "srcs", "dst"}));
        } else {
          TSR_CHECK(object(j, path, {"op", "srcs", "dst", "dst2"}));
        }
        const Json* srcs = nullptr;
        TSR_CHECK(array(j, path, "srcs", true, &srcs));
        if (srcs->size() > static_cast<size_t>(kMaxSrcs)) {
          return fail(child(path, "srcs"), "%zu sources (at most %d)", srcs->size(), kMaxSrcs);
        }
        out->srcs.resize(srcs->size());
        for (size_t i = 0; i < srcs->size(); ++i) {
          TSR_CHECK(ref((*srcs)[i], path + strprintf(".srcs[%zu]", i), &out->srcs[i]));
        }
        TSR_CHECK(readDst2(j, path, out));
        break;
      }
      case OpCode::kSignal:
      case OpCode::kWait:
        TSR_CHECK(object(j, path, {"op", "peer", "channel"}));
        TSR_CHECK(integer(j, path, "peer", true, &out->peer));
        return integer(j, path, "channel", false, &out->channel);
      case OpCode::kFlush:
        TSR_CHECK(object(j, path, {"op", "peer"}));
        return integer(j, path, "peer", true, &out->peer);
      case OpCode::kBarrier: return object(j, path, {"op"});
    }
    const Json* dst = nullptr;
    TSR_CHECK(member(j, path, "dst", true, &dst));
    return ref(*dst, child(path, "dst"), &out->dst);
  }

  Result rank(const Json& j, const std::string& path, int32_t nranks, RankPlan* out) const {
    TSR_CHECK(object(j, path, {"scratchSegments", "credits", "workers"}));
    TSR_CHECK(integer(j, path, "scratchSegments", false, &out->scratchSegments));
    const Json* credits = nullptr;
    TSR_CHECK(array(j, path, "credits", false, &credits));
    // Sizes are checked before anything is allocated for them, so a large document cannot make
    // the reader hold many times its own size (at most one credit per (peer, channel)).
    size_t maxCredits = static_cast<size_t>(nranks) * static_cast<size_t>(kMaxChannels);
    if (credits != nullptr && credits->size() > maxCredits) {
      return fail(child(path, "credits"), "%zu credits (at most %zu)", credits->size(), maxCredits);
    }
    for (size_t i = 0; credits != nullptr && i < credits->size(); ++i) {
      std::string p = child(path, "credits") + strprintf("[%zu]", i);
      const Json& c = (*credits)[i];
      TSR_CHECK(object(c, p, {"peer", "channel", "initial"}));
      Credit credit;
      TSR_CHECK(integer(c, p, "peer", true, &credit.peer));
      TSR_CHECK(integer(c, p, "channel", false, &credit.channel));
      TSR_CHECK(integer(c, p, "initial", true, &credit.initial));
      out->credits.push_back(credit);
    }
    const Json* workers = nullptr;
    TSR_CHECK(array(j, path, "workers", false, &workers));
    if (workers == nullptr) return tsrSuccess;
    if (workers->size() > static_cast<size_t>(kMaxWorkers)) {
      return fail(child(path, "workers"), "%zu workers (at most %d)", workers->size(), kMaxWorkers);
    }
    size_t opsTotal = 0;
    for (size_t w = 0; w < workers->size(); ++w) {
      const Json* ops = (*workers)[w].is_object() && (*workers)[w].contains("ops")
                            ? &(*workers)[w]["ops"]
                            : nullptr;
      if (ops != nullptr && ops->is_array()) opsTotal += ops->size();
    }
    if (opsTotal > static_cast<size_t>(kMaxOpsPerRank)) {
      return fail(child(path, "workers"), "%zu ops (at most %lld)", opsTotal,
                  static_cast<long long>(kMaxOpsPerRank));
    }
    out->workers.resize(workers->size());
    for (size_t w = 0; w < workers->size(); ++w) {
      std::string p = child(path, "workers") + strprintf("[%zu]", w);
      const Json& wj = (*workers)[w];
      TSR_CHECK(object(wj, p, {"ops"}));
      const Json* ops = nullptr;
      TSR_CHECK(array(wj, p, "ops", false, &ops));
      if (ops == nullptr) continue;
      out->workers[w].ops.resize(ops->size());
      for (size_t i = 0; i < ops->size(); ++i) {
        TSR_CHECK(op((*ops)[i], p + strprintf(".ops[%zu]", i), &out->workers[w].ops[i]));
      }
    }
    return tsrSuccess;
  }

  Result plan(const Json& j, Plan* out) const {
    TSR_CHECK(object(j, "",
                     {"format", "version", "name", "collective", "algorithm", "nranks", "root",
                      "chunksPerSegment", "zeroCopy", "canonicalOrder", "ranks"}));
    std::string format;
    TSR_CHECK(string(j, "", "format", true, &format));
    if (format != "tessera-plan") {
      return fail("format", "expected \"tessera-plan\", found \"%s\"", format.c_str());
    }
    int32_t version = 0;
    TSR_CHECK(integer(j, "", "version", true, &version));
    if (version != 1)
      return fail("version", "version %d not supported (this build reads 1)", version);
    TSR_CHECK(string(j, "", "name", false, &out->name));
    TSR_CHECK(name(j, "", "collective", true, kCollectiveCount, collectiveName,
                   "allreduce, reducescatter, allgather, broadcast, reduce, alltoall",
                   &out->collective));
    TSR_CHECK(string(j, "", "algorithm", false, &out->algorithm));
    TSR_CHECK(integer(j, "", "nranks", true, &out->nranks));
    if (out->nranks < 1 || out->nranks > kMaxPlanRanks) {
      return fail("nranks", "%d out of range (1..%d)", out->nranks, kMaxPlanRanks);
    }
    TSR_CHECK(integer(j, "", "root", false, &out->root));
    TSR_CHECK(integer(j, "", "chunksPerSegment", false, &out->chunksPerSegment));
    TSR_CHECK(boolean(j, "", "zeroCopy", &out->zeroCopy));
    TSR_CHECK(boolean(j, "", "canonicalOrder", &out->canonicalOrder));
    const Json* ranks = nullptr;
    TSR_CHECK(array(j, "", "ranks", true, &ranks));
    if (ranks->size() != static_cast<size_t>(out->nranks)) {
      return fail("ranks", "%zu rank plans for nranks %d", ranks->size(), out->nranks);
    }
    out->ranks.resize(ranks->size());
    for (size_t r = 0; r < ranks->size(); ++r) {
      TSR_CHECK(rank((*ranks)[r], strprintf("ranks[%zu]", r), out->nranks, &out->ranks[r]));
    }
    return tsrSuccess;
  }

 private:
  const std::string& source_;
};

}  // namespace

Result checkNesting(const std::string& text, const std::string& source) {
  int depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        inString = false;
      }
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) {
        return TSR_FAIL(tsrInvalidArgument, "%s: nested deeper than %d levels at byte %zu",
                        source.c_str(), kMaxDepth, i);
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return tsrSuccess;
}

Result readPlan(const std::string& text, const std::string& source, Plan* out) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    ErrorFinder finder;
    Json::sax_parse(text, &finder);
    return TSR_FAIL(tsrInvalidArgument, "%s: not valid JSON (byte %zu): %s", source.c_str(),
                    finder.position_, finder.why_.c_str());
  }
  Plan plan;
  TSR_CHECK(Reader(source).plan(doc, &plan));
  TSR_CHECK(checkPlanShapeNamed(plan, source));
  *out = std::move(plan);
  return tsrSuccess;
}

}  // namespace tessera::jsonread

#endif  // TESSERA_HAVE_JSON
