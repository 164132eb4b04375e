// The fused calls behind the C API (src/comm/fused.cpp): argument checks, then the communicator's
// host or device fused executor. Declared here so that c_api.cpp and fused.cpp cannot drift.
#pragma once

#include <cstddef>

#include "core/status.hpp"
#include "tessera/tessera.h"

namespace tessera {

class Communicator;

// Every fused call, descriptor or positional, runs through these two (`api` names the entry
// point in sentences): the descriptor is checked (NULL, size, version), then its fields.
Result fusedApiCall(Communicator& comm, const char* api, const tsrFusedDesc_t* desc,
                    tsrStream_t stream);
Result fusedApiWorkspaceSize(Communicator& comm, const char* api, const tsrFusedDesc_t* desc,
                             int onDevice, size_t* bytes);
// The descriptor of a positional call.
tsrFusedDesc_t fusedDesc(tsrFusedOp_t op, const void* a, const void* b, const void* bias, void* c,
                         void* gatheredA, size_t m, size_t n, size_t k, tsrDataType_t inType,
                         tsrDataType_t outType, int flags);

}  // namespace tessera
