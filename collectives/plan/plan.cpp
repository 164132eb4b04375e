// Names, parsing and layout helpers of the plan IR (plan.hpp). Placeholder until written.
#include "collectives/plan/plan.hpp"
