// Reading a plan from JSON text (internal to collectives/plan; plan_json.hpp is the contract).
// Only built with TESSERA_HAVE_JSON.
#pragma once

#include <string>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"

namespace tessera::jsonread {

// Fails when arrays/objects nest deeper than the format ever needs, before any parser sees the
// text (a recursive parser, or the destruction of its tree, could otherwise exhaust the stack).
Result checkNesting(const std::string& text, const std::string& source);

// Parses, type-checks every field (errors name the JSON path), then runs checkPlanShape.
Result readPlan(const std::string& text, const std::string& source, Plan* out);

}  // namespace tessera::jsonread
