// The C API's communicator handles. A tsrComm_t is not a pointer to memory: it encodes an id
// that is never reused, looked up in a table. A destroyed or made-up handle is therefore found
// missing (tsrInvalidUsage with a sentence) instead of being dereferenced.
#pragma once

#include <memory>

#include "core/status.hpp"
#include "tessera/tessera.hpp"

namespace tessera {

tsrComm_t handleRegister(std::unique_ptr<Communicator> comm);
// The communicator behind `h`, or a failure naming `api` when h is null, destroyed or unknown.
Result handleLookup(tsrComm_t h, const char* api, std::shared_ptr<Communicator>* out);
// Removes `h` from the table and returns its communicator (destroyed when the last user drops it).
Result handleRemove(tsrComm_t h, const char* api, std::shared_ptr<Communicator>* out);

}  // namespace tessera
