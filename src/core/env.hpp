// The one registry of TESSERA_* environment variables (env_registry.cpp) and typed access.
//
// Every variable tessera reads is declared in the registry with its type, default and meaning;
// reading an undeclared name is an internal error, and a value that does not parse is
// tsrInvalidArgument with a sentence, never a silent default.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.hpp"

namespace tessera {

enum class EnvType { kInt, kBool, kDouble, kString, kEnum };

struct EnvVarInfo {
  const char* name;
  EnvType type;
  const char* defaultValue;  // as text; "" for none
  const char* meaning;
  const char* choices;  // kEnum: "A|B|C" (case-insensitive); otherwise nullptr
  double minValue;      // kInt/kDouble: inclusive bounds
  double maxValue;
  // Extra check for kString values; returns false and fills `why` when invalid.
  bool (*validate)(const char* value, std::string* why);
};

std::span<const EnvVarInfo> envRegistry();
const EnvVarInfo* envFind(const char* name);

// The raw value, or nullptr when unset (or set to the empty string).
const char* envRaw(const char* name);

// Typed reads: the value if set, else the registered default. tsrInvalidArgument (with the
// variable, the value and what is allowed) when the value does not parse or is out of range.
Result envInt(const char* name, int64_t* out);
Result envBool(const char* name, bool* out);
Result envDouble(const char* name, double* out);
Result envString(const char* name, std::string* out);
// kEnum: the canonical (upper-case) choice.
Result envEnum(const char* name, std::string* out);

// Checks every set TESSERA_* variable against the registry. Invalid values are
// tsrInvalidArgument; names not in the registry are logged as warnings (probably typos).
Result envValidateAll();

const char* envTypeName(EnvType type);

}  // namespace tessera
