// TESSERA_ALGO and TESSERA_PROTO in NCCL's syntax. A value is rules separated by ';'; a rule is
// "[collective[,collective...]:][^]name[,name...]". A rule without collectives applies to all of
// them; later rules replace earlier ones for the collectives they name; '^' allows everything
// but the names. Names and collectives are case-insensitive, spaces around them are ignored.
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/tuner/tuner.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTuning;

using Allowed = std::array<std::vector<bool>, kCollectiveCount>;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Calls fn(piece) for each piece of `s` split at `sep` (pieces trimmed; empty ones included).
template <typename Fn>
Result forEachPiece(std::string_view s, char sep, Fn&& fn) {
  while (true) {
    size_t at = s.find(sep);
    TSR_CHECK(fn(trim(s.substr(0, at))));
    if (at == std::string_view::npos) return tsrSuccess;
    s.remove_prefix(at + 1);
  }
}

std::string joinNames(const std::vector<const char*>& names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// Parses `value` of variable `var` against `names` into `allowed` (every collective's vector
// has names.size() entries afterwards).
Result parseRules(const char* var, const char* noun, const std::string& value,
                  const std::vector<const char*>& names, Allowed* allowed) {
  for (auto& v : *allowed) v.assign(names.size(), true);
  return forEachPiece(value, ';', [&](std::string_view rule) -> Result {
    if (rule.empty()) return tsrSuccess;  // "a;b;" and stray separators
    std::array<bool, kCollectiveCount> target{};
    std::string_view list = rule;
    size_t colon = rule.find(':');
    if (colon == std::string_view::npos) {
      target.fill(true);
    } else {
      list = trim(rule.substr(colon + 1));
      TSR_CHECK(forEachPiece(rule.substr(0, colon), ',', [&](std::string_view coll) -> Result {
        Collective c{};
        if (coll.empty())
          return TSR_FAIL(tsrInvalidArgument, "%s=%s: rule '%.*s' names an empty collective", var,
                          value.c_str(), static_cast<int>(rule.size()), rule.data());
        if (collectiveParse(std::string(coll), &c) != tsrSuccess)
          return addContext(tsrInvalidArgument, "%s=%s: rule '%.*s'", var, value.c_str(),
                            static_cast<int>(rule.size()), rule.data());
        target[static_cast<size_t>(c)] = true;
        return tsrSuccess;
      }));
    }
    bool negate = !list.empty() && list.front() == '^';
    if (negate) list = trim(list.substr(1));
    std::vector<bool> named(names.size(), false);
    TSR_CHECK(forEachPiece(list, ',', [&](std::string_view name) -> Result {
      if (name.empty())
        return TSR_FAIL(tsrInvalidArgument, "%s=%s: rule '%.*s' names an empty %s (valid: %s)", var,
                        value.c_str(), static_cast<int>(rule.size()), rule.data(), noun,
                        joinNames(names).c_str());
      for (size_t i = 0; i < names.size(); ++i) {
        if (std::string_view(names[i]).size() == name.size() &&
            strncasecmp(names[i], name.data(), name.size()) == 0) {
          named[i] = true;
          return tsrSuccess;
        }
      }
      return TSR_FAIL(tsrInvalidArgument, "%s=%s: unknown %s '%.*s' (valid: %s)", var,
                      value.c_str(), noun, static_cast<int>(name.size()), name.data(),
                      joinNames(names).c_str());
    }));
    for (int c = 0; c < kCollectiveCount; ++c) {
      if (!target[static_cast<size_t>(c)]) continue;
      auto& v = (*allowed)[static_cast<size_t>(c)];
      for (size_t i = 0; i < names.size(); ++i) v[i] = named[i] != negate;
    }
    return tsrSuccess;
  });
}

}  // namespace

Result parseAlgoFilter(const std::string& value, AlgoFilter* out, const char* var) {
  std::vector<const char*> names;
  for (const AlgorithmInfo& a : algorithms()) names.push_back(a.name);
  AlgoFilter f;
  f.text = value;
  f.var = var;
  TSR_CHECK(parseRules(var, "algorithm", value, names, &f.allowed));
  // A filter that allows everything is the same as none: keep the vectors empty ("unset").
  for (auto& v : f.allowed)
    if (std::all_of(v.begin(), v.end(), [](bool b) { return b; })) v.clear();
  *out = std::move(f);
  return tsrSuccess;
}

const char* protocolName(Protocol p) { return p == Protocol::kLL ? "LL" : "Simple"; }

Result parseProtoFilter(const std::string& value, ProtoFilter* out, const char* var) {
  // NCCL's protocol names; LL128 parses (a NCCL value works here) but tessera has no such protocol.
  static const std::vector<const char*> kProtocols = {"Simple", "LL", "LL128"};
  Allowed allowed;
  TSR_CHECK(parseRules(var, "protocol", value, kProtocols, &allowed));
  ProtoFilter f;
  f.text = value;
  int without = 0, first = -1;
  for (int c = 0; c < kCollectiveCount; ++c) {
    const std::vector<bool>& a = allowed[static_cast<size_t>(c)];
    f.allowed[static_cast<size_t>(c)] = {a[0], a[1]};
    if (a[0] || a[1]) continue;
    ++without;
    if (first < 0) first = c;
  }
  if (without == kCollectiveCount)
    return TSR_FAIL(tsrInvalidArgument, "%s=%s leaves no protocol tessera has (Simple, LL)", var,
                    value.c_str());
  if (without > 0)
    return TSR_FAIL(tsrInvalidArgument, "%s=%s leaves no protocol tessera has (Simple, LL) for %s",
                    var, value.c_str(), collectiveName(static_cast<Collective>(first)));
  *out = std::move(f);
  return tsrSuccess;
}

Result parseProtoFilter(const std::string& value) {
  ProtoFilter f;
  return parseProtoFilter(value, &f);
}

}  // namespace tessera
