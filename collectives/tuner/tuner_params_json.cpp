// TESSERA_TUNER_FILE: the cost model's parameters as JSON,
//   {"links": {"shm": {"alphaUs": 0.4, "betaGBs": 6}, "ucx": {...}},
//    "crossMemory": {"alphaUs": 2, "betaGBs": 8}, "gammaGBs": 4, "callOverheadUs": 0.3,
//    "deviceGammaGBs": 1100, "deviceCopyGBs": 1650, "deviceNet": {"alphaUs": 5, "betaGBs": 50},
//    "devicePcie": {"alphaUs": 3, "betaGBs": 25},
//    "measured": [...]}
// and the measured table of tuner_table.hpp ("measured"), with what tessera_tune writes about
// itself ("tool", "host", "created"; read and ignored). Every field is optional: one absent keeps
// the value *out already holds (Tuner::fromEnv starts from defaultTunerParams()). Anything
// unknown or out of range is an error naming its path, so a typo never silently leaves a default
// in place. *out changes only on success.
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/tuner/tuner.hpp"
#include "collectives/tuner/tuner_table.hpp"
#include "core/build_config.hpp"

#if TESSERA_HAVE_JSON
#include <nlohmann/json.hpp>
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTuning;
}  // namespace

#if TESSERA_HAVE_JSON
namespace {

using nlohmann::json;

// A parameters document with a measured table is some tens of kilobytes; refuse what cannot be one
// before parsing.
constexpr size_t kMaxTextBytes = 4 << 20;
// Bounds of a measured table, so a hostile file cannot make the tuner's lookups slow.
constexpr size_t kMaxSets = 256, kMaxPoints = 64, kMaxFamilies = 32;

std::string shown(const json& v) {
  // Arrays and objects are named, not dumped: dump() recurses once per level of nesting, and a
  // hostile file nests as deep as its size allows (a stack overflow; found by fuzz_tuner_file).
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

Result badField(const std::string& path, const char* why) {
  // Keys come from the file: keep a hostile one from flooding the sentence.
  std::string p = path.size() > 80 ? path.substr(0, 77) + "..." : path;
  return TSR_FAIL(tsrInvalidArgument, "tuner parameters: %s: %s", p.c_str(), why);
}

// A finite number in [lo, hi] (lo excluded when `open`).
Result number(const json& v, const std::string& path, double lo, double hi, bool open,
              double* out) {
  if (!v.is_number())
    return TSR_FAIL(tsrInvalidArgument, "tuner parameters: %s: expected a number, got %s",
                    path.c_str(), shown(v).c_str());
  double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || (open && x == lo) || x > hi)
    return TSR_FAIL(tsrInvalidArgument, "tuner parameters: %s: %s must be %s %g and at most %g",
                    path.c_str(), shown(v).c_str(), open ? "above" : "at least", lo, hi);
  *out = x;
  return tsrSuccess;
}

// Bounds: no real link is slower than a second per step or faster than a PB/s.
constexpr double kMaxUs = 1e6;
constexpr double kMaxGBs = 1e6;

Result parseLink(const json& v, const std::string& path, LinkModel* link) {
  if (!v.is_object()) return badField(path, "expected an object with alphaUs and betaGBs");
  for (const auto& [key, value] : v.items()) {
    std::string at = path + "." + key;
    if (key == "alphaUs") {
      TSR_CHECK(number(value, at, 0, kMaxUs, false, &link->alphaUs));
    } else if (key == "betaGBs") {
      TSR_CHECK(number(value, at, 0, kMaxGBs, true, &link->betaGBs));
    } else {
      return badField(at, "unknown key (expected alphaUs, betaGBs)");
    }
  }
  return tsrSuccess;
}

Result parseLinks(const json& v, TunerParams* p) {
  if (!v.is_object()) return badField("links", "expected an object keyed by transport name");
  for (const auto& [key, value] : v.items()) {
    TransportKind kind{};
    if (!parseTransportKind(key, &kind))
      return badField("links." + key,
                      "unknown transport (expected inproc, shm, ucx, cuda_ipc, p2p)");
    TSR_CHECK(parseLink(value, "links." + key, &p->links[static_cast<size_t>(kind)]));
  }
  return tsrSuccess;
}

Result parsePoint(const json& v, const std::string& path, MeasuredPoint* out) {
  if (!v.is_object()) return badField(path, "expected an object with bytes and us");
  bool haveBytes = false;
  for (const auto& [key, value] : v.items()) {
    std::string at = path + "." + key;
    if (key == "bytes") {
      double b = 0;
      TSR_CHECK(number(value, at, 0, 1099511627776.0, false, &b));
      if (b != static_cast<double>(static_cast<uint64_t>(b))) return badField(at, "not an integer");
      out->bytes = static_cast<uint64_t>(b);
      haveBytes = true;
    } else if (key == "us") {
      if (!value.is_object() || value.size() > kMaxFamilies)
        return badField(at, "expected an object of at most 32 family: microseconds entries");
      for (const auto& [family, us] : value.items()) {
        if (findAlgorithm(family) == nullptr)
          return badField(at + "." + family, "unknown algorithm family");
        MeasuredFamily f;
        f.family = findAlgorithm(family)->name;
        TSR_CHECK(number(us, at + "." + family, 0, kMaxUs * 1000, true, &f.us));
        out->families.push_back(std::move(f));
      }
    } else if (key == "crossUs") {
      TSR_CHECK(number(value, at, 0, kMaxUs * 1000, true, &out->crossUs));
    } else {
      return badField(at, "unknown key (expected bytes, us, crossUs)");
    }
  }
  if (!haveBytes) return badField(path, "has no bytes");
  return tsrSuccess;
}

Result parseSet(const json& v, const std::string& path, MeasuredSet* out) {
  if (!v.is_object())
    return badField(path, "expected an object with collective, nranks, transport, points");
  bool haveColl = false;
  for (const auto& [key, value] : v.items()) {
    std::string at = path + "." + key;
    if (key == "collective") {
      if (!value.is_string() ||
          collectiveParse(value.get<std::string>(), &out->collective) != tsrSuccess)
        return badField(at, "expected a collective's name");
      haveColl = true;
    } else if (key == "nranks") {
      double n = 0;
      TSR_CHECK(number(value, at, 1, kMaxPlanRanks, false, &n));
      out->nranks = static_cast<int>(n);
    } else if (key == "transport") {
      if (!value.is_string() || !parseTransportKind(value.get<std::string>(), &out->transport))
        return badField(at, "expected a transport's name");
    } else if (key == "points") {
      if (!value.is_array() || value.size() > kMaxPoints)
        return badField(at, "expected an array of at most 64 points");
      for (size_t i = 0; i < value.size(); ++i) {
        MeasuredPoint pt;
        TSR_CHECK(parsePoint(value[i], strprintf("%s[%zu]", at.c_str(), i), &pt));
        if (!out->points.empty() && pt.bytes <= out->points.back().bytes)
          return badField(strprintf("%s[%zu]", at.c_str(), i),
                          "points must come in increasing bytes");
        out->points.push_back(std::move(pt));
      }
    } else {
      return badField(at, "unknown key (expected collective, nranks, transport, points)");
    }
  }
  if (!haveColl) return badField(path, "has no collective");
  return tsrSuccess;
}

Result parseMeasured(const json& v, MeasuredTable* out) {
  if (!v.is_array() || v.size() > kMaxSets)
    return badField("measured", "expected an array of at most 256 sets");
  for (size_t i = 0; i < v.size(); ++i) {
    MeasuredSet set;
    TSR_CHECK(parseSet(v[i], strprintf("measured[%zu]", i), &set));
    if (out->find(set.collective, set.nranks, set.transport) != nullptr)
      return badField(strprintf("measured[%zu]", i),
                      "a second set for the same collective, "
                      "rank count and transport");
    out->sets.push_back(std::move(set));
  }
  return tsrSuccess;
}

json linkJson(const LinkModel& l) { return json{{"alphaUs", l.alphaUs}, {"betaGBs", l.betaGBs}}; }

}  // namespace

Result tunerParamsFromJson(const std::string& text, TunerParams* out) {
  MeasuredTable ignored;
  return tunerFileFromJson(text, out, &ignored);
}

std::string tunerFileToJson(const TunerParams& p, const MeasuredTable& table,
                            const std::string& tool, const std::string& host,
                            const std::string& created) {
  json doc;
  doc["tool"] = tool;
  doc["host"] = host;
  doc["created"] = created;
  json links = json::object();
  for (int k = 0; k < kTransportKinds; ++k)
    links[transportName(static_cast<TransportKind>(k))] = linkJson(p.links[static_cast<size_t>(k)]);
  doc["links"] = links;
  doc["crossMemory"] = linkJson(p.crossMemory);
  doc["gammaGBs"] = p.gammaGBs;
  doc["callOverheadUs"] = p.callOverheadUs;
  doc["deviceGammaGBs"] = p.deviceGammaGBs;
  doc["deviceCopyGBs"] = p.deviceCopyGBs;
  doc["deviceNet"] = linkJson(p.deviceNet);
  doc["devicePcie"] = linkJson(p.devicePcie);
  json sets = json::array();
  for (const MeasuredSet& s : table.sets) {
    json points = json::array();
    for (const MeasuredPoint& pt : s.points) {
      json us = json::object();
      for (const MeasuredFamily& f : pt.families) us[f.family] = f.us;
      json jp{{"bytes", pt.bytes}, {"us", us}};
      if (pt.crossUs > 0) jp["crossUs"] = pt.crossUs;
      points.push_back(jp);
    }
    sets.push_back(json{{"collective", collectiveName(s.collective)},
                        {"nranks", s.nranks},
                        {"transport", transportName(s.transport)},
                        {"points", points}});
  }
  doc["measured"] = sets;
  return doc.dump(1) + "\n";
}

Result tunerFileFromJson(const std::string& text, TunerParams* out, MeasuredTable* table) {
  if (text.size() > kMaxTextBytes)
    return TSR_FAIL(tsrInvalidArgument, "tuner parameters: %zu bytes of JSON, more than %zu",
                    text.size(), kMaxTextBytes);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const std::exception& e) {  // nlohmann reports syntax errors as exceptions
    return TSR_FAIL(tsrInvalidArgument, "tuner parameters: not valid JSON: %s", e.what());
  }
  if (!doc.is_object())
    return badField("(top level)", "expected an object with links, gammaGBs, callOverheadUs, ...");
  TunerParams p = *out;
  MeasuredTable t;
  for (const auto& [key, value] : doc.items()) {
    if (key == "tool" || key == "host" || key == "created") {
      if (!value.is_string()) return badField(key, "expected a string");
    } else if (key == "measured") {
      TSR_CHECK(parseMeasured(value, &t));
    } else if (key == "links") {
      TSR_CHECK(parseLinks(value, &p));
    } else if (key == "crossMemory") {
      TSR_CHECK(parseLink(value, key, &p.crossMemory));
    } else if (key == "gammaGBs") {
      TSR_CHECK(number(value, key, 0, kMaxGBs, true, &p.gammaGBs));
    } else if (key == "callOverheadUs") {
      TSR_CHECK(number(value, key, 0, kMaxUs, false, &p.callOverheadUs));
    } else if (key == "deviceGammaGBs") {
      TSR_CHECK(number(value, key, 0, kMaxGBs, true, &p.deviceGammaGBs));
    } else if (key == "deviceCopyGBs") {
      TSR_CHECK(number(value, key, 0, kMaxGBs, true, &p.deviceCopyGBs));
    } else if (key == "deviceNet") {
      TSR_CHECK(parseLink(value, key, &p.deviceNet));
    } else if (key == "devicePcie") {
      TSR_CHECK(parseLink(value, key, &p.devicePcie));
    } else {
      return badField(key,
                      "unknown key (expected links, crossMemory, gammaGBs, callOverheadUs, "
                      "deviceGammaGBs, deviceCopyGBs, deviceNet, devicePcie, measured, tool, "
                      "host, created)");
    }
  }
  *out = p;
  *table = std::move(t);
  return tsrSuccess;
}

#else  // no nlohmann-json at build time

Result tunerParamsFromJson(const std::string& /*text*/, TunerParams* /*out*/) {
  return TSR_FAIL(tsrInvalidUsage,
                  "tuner parameters are JSON and this build of tessera has no JSON support "
                  "(configure it with nlohmann-json installed, or TESSERA_JSON_INCLUDE_DIR)");
}

Result tunerFileFromJson(const std::string& text, TunerParams* out, MeasuredTable*) {
  return tunerParamsFromJson(text, out);
}

std::string tunerFileToJson(const TunerParams&, const MeasuredTable&, const std::string&,
                            const std::string&, const std::string&) {
  return "";
}

#endif

}  // namespace tessera
