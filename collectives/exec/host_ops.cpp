// Placeholder: the host op kernels are being written.
#include "collectives/exec/engine.hpp"
