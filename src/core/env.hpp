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

// NCCL_* variables read in place of the TESSERA_* ones they map onto (env_registry.cpp), so that
// a job written for NCCL keeps its settings under tessera's NCCL drop-in. Only where NCCL's
// meaning and value syntax are tessera's; a NCCL value tessera does not take is an error naming
// the NCCL_* variable, as for tessera's own.
struct EnvAlias {
  const char* name;   // TESSERA_*
  const char* alias;  // NCCL_*
};
std::span<const EnvAlias> envNcclAliases();
// The NCCL_* alias of a TESSERA_* variable, or nullptr when it has none.
const char* envNcclAlias(const char* tesseraName);
// Whether aliases are read now: TESSERA_NCCL_ENV is 1 (true, yes, on).
bool envNcclAliasesActive();

// The raw value, or nullptr when unset (or set to the empty string). A TESSERA_* variable that is
// unset takes its NCCL_* alias's value while aliases are active.
const char* envRaw(const char* name);
// The variable envRaw(name) takes its value from: the alias when the value is the alias's, else
// `name` (also when unset). For sentences about a value: they name what the user set.
const char* envSourceName(const char* name);

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
