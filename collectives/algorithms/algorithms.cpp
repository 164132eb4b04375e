// Placeholder: the registry is being written.
#include "collectives/algorithms/algorithms.hpp"
