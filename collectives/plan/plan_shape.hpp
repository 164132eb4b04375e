// checkPlanShape with the name of the plan's source in its sentences (internal to
// collectives/plan): planFromJson reports "plan.json: ranks[1]...." where checkPlanShape says
// "plan: ranks[1]....".
#pragma once

#include <string>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"

namespace tessera {

Result checkPlanShapeNamed(const Plan& p, const std::string& source);

}  // namespace tessera
