// Reading a whole text file (a plan, a machine, a workload, measured kernel times) with the
// failure as a sentence.
#pragma once

#include <string>

#include "core/status.hpp"

namespace tessera {

// The file at `path` into *out; `what` names it in the error ("the workload file"):
// tsrInvalidArgument "cannot open <what> <path>" or "cannot read <what> <path>".
Result readTextFile(const std::string& path, const char* what, std::string* out);

}  // namespace tessera
