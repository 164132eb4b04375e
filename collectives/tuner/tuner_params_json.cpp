// TESSERA_TUNER_FILE: the cost model's parameters as JSON,
//   {"links": {"shm": {"alphaUs": 0.4, "betaGBs": 6}, "ucx": {...}}, "gammaGBs": 4,
//    "callOverheadUs": 0.3}
// Every field is optional: one absent keeps the value *out already holds (Tuner::fromEnv starts
// from defaultTunerParams()). Anything unknown or out of range is an error naming its path, so a
// typo never silently leaves a default in place. *out changes only on success.
#include <cmath>

#include "collectives/tuner/tuner.hpp"
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

// A parameters document is a few hundred bytes; refuse what cannot be one before parsing.
constexpr size_t kMaxTextBytes = 1 << 20;

std::string shown(const json& v) {
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

}  // namespace

Result tunerParamsFromJson(const std::string& text, TunerParams* out) {
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
    return badField("(top level)", "expected an object with links, gammaGBs, callOverheadUs");
  TunerParams p = *out;
  for (const auto& [key, value] : doc.items()) {
    if (key == "links") {
      TSR_CHECK(parseLinks(value, &p));
    } else if (key == "crossMemory") {
      TSR_CHECK(parseLink(value, key, &p.crossMemory));
    } else if (key == "gammaGBs") {
      TSR_CHECK(number(value, key, 0, kMaxGBs, true, &p.gammaGBs));
    } else if (key == "callOverheadUs") {
      TSR_CHECK(number(value, key, 0, kMaxUs, false, &p.callOverheadUs));
    } else {
      return badField(key, "unknown key (expected links, crossMemory, gammaGBs, callOverheadUs)");
    }
  }
  *out = p;
  return tsrSuccess;
}

#else  // no nlohmann-json at build time

Result tunerParamsFromJson(const std::string& /*text*/, TunerParams* /*out*/) {
  return TSR_FAIL(tsrInvalidUsage,
                  "tuner parameters are JSON and this build of tessera has no JSON support "
                  "(configure it with nlohmann-json installed, or TESSERA_JSON_INCLUDE_DIR)");
}

#endif

}  // namespace tessera
