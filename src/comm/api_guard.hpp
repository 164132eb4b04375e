// The C API's exception barrier (src/comm only).
#pragma once

#include <new>
#include <system_error>

#include "core/status.hpp"

namespace tessera {

// No exception crosses the C boundary: what the standard library throws (out of memory, no
// more threads) becomes an error code with a sentence.
template <class F>
tsrResult_t guarded(const char* api, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return failWith(Subsys::kComm, tsrSystemError, "%s: out of memory", api);
  } catch (const std::system_error& e) {
    return failWith(Subsys::kComm, tsrSystemError, "%s: %s", api, e.what());
  } catch (const std::exception& e) {
    return failWith(Subsys::kComm, tsrInternalError, "%s: unexpected exception: %s", api, e.what());
  } catch (...) {
    return failWith(Subsys::kComm, tsrInternalError, "%s: unexpected exception", api);
  }
}

}  // namespace tessera
