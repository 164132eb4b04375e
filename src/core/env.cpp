#include "core/env.hpp"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

extern char** environ;

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kEnv;

const EnvVarInfo* lookup(const char* name, Result* r) {
  const EnvVarInfo* info = envFind(name);
  if (info == nullptr)
    *r = TSR_FAIL(tsrInternalError,
                  "environment variable %s is read but not declared in the registry", name);
  return info;
}

// The words a kBool takes; false when `v` is none of them.
bool boolWord(const char* v, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* w : kTrue)
    if (strcasecmp(v, w) == 0) {
      *out = true;
      return true;
    }
  for (const char* w : kFalse)
    if (strcasecmp(v, w) == 0) {
      *out = false;
      return true;
    }
  return false;
}

// The value to parse (the set value, else the default) and the variable it is reported under:
// the NCCL_* alias when the value came from there, so that a sentence names what the user set.
struct Value {
  const char* text;
  const char* var;
  bool fromEnv;
};

// Reads `name` and, when it is unset and aliases are active, its alias; *source is the one read.
const char* rawAndSource(const char* name, const char** source) {
  *source = name;
  const char* v = std::getenv(name);
  if (v != nullptr && *v != '\0') return v;
  const char* alias = envNcclAlias(name);
  if (alias == nullptr || !envNcclAliasesActive()) return nullptr;
  v = std::getenv(alias);
  if (v == nullptr || *v == '\0') return nullptr;
  *source = alias;
  return v;
}

Value valueOf(const EnvVarInfo& info) {
  const char* var = info.name;
  const char* v = rawAndSource(info.name, &var);
  if (v == nullptr) return Value{info.defaultValue, info.name, false};
  return Value{v, var, true};
}

Result badValue(const EnvVarInfo& info, const Value& v, const std::string& why) {
  if (std::strcmp(v.var, info.name) != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "invalid value '%s' for %s (read as %s, TESSERA_NCCL_ENV=1): %s (%s)", v.text,
                    v.var, info.name, why.c_str(), info.meaning);
  return TSR_FAIL(tsrInvalidArgument, "invalid value '%s' for %s: %s (%s)", v.text, info.name,
                  why.c_str(), info.meaning);
}

Result parseInt(const EnvVarInfo& info, const Value& val, int64_t* out) {
  const char* v = val.text;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);  // decimal: "010" is ten, not octal eight
  if (errno != 0 || end == v || *end != '\0') return badValue(info, val, "expected an integer");
  if (static_cast<double>(x) < info.minValue || static_cast<double>(x) > info.maxValue)
    return badValue(info, val, strprintf("must be in [%.0f, %.0f]", info.minValue, info.maxValue));
  *out = x;
  return tsrSuccess;
}

Result parseDouble(const EnvVarInfo& info, const Value& val, double* out) {
  const char* v = val.text;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  // strtod also takes hexadecimal ("0x1p4"); a time or a size written that way is a mistake.
  bool hex = std::strchr(v, 'x') != nullptr || std::strchr(v, 'X') != nullptr;
  if (errno != 0 || end == v || *end != '\0' || !std::isfinite(x) || hex)
    return badValue(info, val, "expected a number");
  if (x < info.minValue || x > info.maxValue)
    return badValue(info, val, strprintf("must be in [%g, %g]", info.minValue, info.maxValue));
  *out = x;
  return tsrSuccess;
}

Result parseBool(const EnvVarInfo& info, const Value& val, bool* out) {
  if (boolWord(val.text, out)) return tsrSuccess;
  return badValue(info, val, "expected 0/1, true/false, yes/no or on/off");
}

Result parseEnum(const EnvVarInfo& info, const Value& val, std::string* out) {
  std::string choices = info.choices != nullptr ? info.choices : "";
  size_t pos = 0;
  while (pos <= choices.size()) {
    size_t bar = choices.find('|', pos);
    std::string c = choices.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos);
    if (strcasecmp(c.c_str(), val.text) == 0) {
      *out = c;
      return tsrSuccess;
    }
    if (bar == std::string::npos) break;
    pos = bar + 1;
  }
  return badValue(info, val, "expected one of " + choices);
}

Result parseString(const EnvVarInfo& info, const Value& val, std::string* out) {
  std::string why;
  if (info.validate != nullptr && !info.validate(val.text, &why)) return badValue(info, val, why);
  *out = val.text;
  return tsrSuccess;
}

Result checkType(const EnvVarInfo& info, EnvType want) {
  if (info.type == want) return tsrSuccess;
  return TSR_FAIL(tsrInternalError, "%s is registered as %s but read as %s", info.name,
                  envTypeName(info.type), envTypeName(want));
}

}  // namespace

const EnvVarInfo* envFind(const char* name) {
  if (name == nullptr) return nullptr;
  for (const EnvVarInfo& info : envRegistry())
    if (std::strcmp(info.name, name) == 0) return &info;
  return nullptr;
}

const char* envNcclAlias(const char* tesseraName) {
  if (tesseraName == nullptr) return nullptr;
  for (const EnvAlias& a : envNcclAliases())
    if (std::strcmp(a.name, tesseraName) == 0) return a.alias;
  return nullptr;
}

bool envNcclAliasesActive() {
  // Read directly, not through envBool: envRaw calls this, and a bad value is envValidateAll's
  // to report (an unparsable value leaves aliases off until then).
  const char* v = std::getenv("TESSERA_NCCL_ENV");
  bool on = false;
  return v != nullptr && boolWord(v, &on) && on;
}

const char* envRaw(const char* name) {
  const char* source;
  return rawAndSource(name, &source);
}

const char* envSourceName(const char* name) {
  const char* source;
  return rawAndSource(name, &source) != nullptr ? source : name;
}

Result envInt(const char* name, int64_t* out) {
  Result r = tsrSuccess;
  const EnvVarInfo* info = lookup(name, &r);
  if (info == nullptr) return r;
  TSR_CHECK(checkType(*info, EnvType::kInt));
  return parseInt(*info, valueOf(*info), out);
}

Result envBool(const char* name, bool* out) {
  Result r = tsrSuccess;
  const EnvVarInfo* info = lookup(name, &r);
  if (info == nullptr) return r;
  TSR_CHECK(checkType(*info, EnvType::kBool));
  return parseBool(*info, valueOf(*info), out);
}

Result envDouble(const char* name, double* out) {
  Result r = tsrSuccess;
  const EnvVarInfo* info = lookup(name, &r);
  if (info == nullptr) return r;
  TSR_CHECK(checkType(*info, EnvType::kDouble));
  return parseDouble(*info, valueOf(*info), out);
}

Result envString(const char* name, std::string* out) {
  Result r = tsrSuccess;
  const EnvVarInfo* info = lookup(name, &r);
  if (info == nullptr) return r;
  TSR_CHECK(checkType(*info, EnvType::kString));
  Value v = valueOf(*info);
  if (!v.fromEnv) {
    *out = v.text;
    return tsrSuccess;
  }
  return parseString(*info, v, out);
}

Result envEnum(const char* name, std::string* out) {
  Result r = tsrSuccess;
  const EnvVarInfo* info = lookup(name, &r);
  if (info == nullptr) return r;
  TSR_CHECK(checkType(*info, EnvType::kEnum));
  return parseEnum(*info, valueOf(*info), out);
}

Result envValidateAll() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "TESSERA_", 8) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string name(*e, static_cast<size_t>(eq - *e));
    if (envFind(name.c_str()) == nullptr) {
      // Once per name and process: every init validates, but one warning is enough.
      static std::mutex mutex;
      static std::set<std::string> warned;
      std::lock_guard<std::mutex> lock(mutex);
      if (warned.insert(name).second)
        TSR_WARN("%s is set but tessera has no such variable (see tessera_info --env)",
                 name.c_str());
    }
  }
  for (const EnvVarInfo& info : envRegistry()) {
    if (envRaw(info.name) == nullptr) continue;
    Result r = tsrSuccess;
    int64_t i;
    bool b;
    double d;
    std::string s;
    switch (info.type) {
      case EnvType::kInt: r = envInt(info.name, &i); break;
      case EnvType::kBool: r = envBool(info.name, &b); break;
      case EnvType::kDouble: r = envDouble(info.name, &d); break;
      case EnvType::kString: r = envString(info.name, &s); break;
      case EnvType::kEnum: r = envEnum(info.name, &s); break;
    }
    // The first invalid variable is the one reported (its sentence is the last error).
    if (r != tsrSuccess) return r;
  }
  return tsrSuccess;
}

const char* envTypeName(EnvType type) {
  switch (type) {
    case EnvType::kInt: return "int";
    case EnvType::kBool: return "bool";
    case EnvType::kDouble: return "number";
    case EnvType::kString: return "string";
    case EnvType::kEnum: return "enum";
  }
  return "?";
}

}  // namespace tessera
