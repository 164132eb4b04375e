// tessera_tune's parts (tessera_tune.cpp: options, the family measurements, the file;
// tessera_tune_links.cpp: the cost model's parameters).
#pragma once

#include <string>

#include "collectives/tuner/tuner.hpp"

namespace tessera::tune {

// Measures alpha and beta of shm (two processes) and inproc (two threads), cross-memory attach,
// the reduction rate and the call overhead into *params; *report is a line saying what it found.
// "" or what failed.
std::string measureLinks(TunerParams* params, std::string* report);

}  // namespace tessera::tune
