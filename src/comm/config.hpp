// tsrConfig_t, validated and completed with defaults (TESSERA_* variables, then built-in).
#pragma once

#include <string>

#include "core/status.hpp"

namespace tessera {

struct CommConfig {
  bool blocking = true;
  int cgaClusterSize = 0;
  int minCTAs = 1;
  int maxCTAs = 16;
  std::string netName;  // "" = automatic
  bool splitShare = false;
  int device = TSR_DEVICE_CURRENT;
  // tsrConfig_t.timeoutMs in seconds; 0: TESSERA_BOOTSTRAP_TIMEOUT / TESSERA_TRANSPORT_TIMEOUT.
  double timeoutSeconds = 0;
};

// Checks `user` (may be null: all defaults) field by field; an invalid field is
// tsrInvalidArgument naming the field and its value. `inherit`, when given, provides the values
// of undefined fields instead of the defaults (tsrCommSplit inherits the parent's config).
Result resolveConfig(const tsrConfig_t* user, const CommConfig* inherit, CommConfig* out);

}  // namespace tessera
