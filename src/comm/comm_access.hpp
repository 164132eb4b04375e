// The library's own access to a tessera::Communicator's implementation. tessera.hpp keeps the
// implementation private (users see an opaque object); src/comm, and tests and tools that need
// the internals, come through here.
#pragma once

#include <memory>
#include <utility>

#include "tessera/tessera.hpp"

namespace tessera {

class CommImpl;

struct CommAccess {
  static CommImpl* impl(const Communicator& comm) { return comm.impl_.get(); }
  static std::unique_ptr<Communicator> wrap(std::shared_ptr<CommImpl> impl) {
    return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
  }
};

inline CommImpl* commImpl(const Communicator& comm) { return CommAccess::impl(comm); }

}  // namespace tessera
