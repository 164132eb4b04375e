// The root of a TCP bootstrap: a detached thread of the process that created the unique id. It
// gathers every rank's hello, checks it, sends every rank the table of listen addresses and
// exits. It reports what went wrong (a rank refused, ranks that never came) to the ranks that
// did come, then exits.
//
// The thread may still run while the process exits: it keeps its state on the heap, uses no
// global object (no logging), and otherwise sleeps in poll().
#pragma once

#include <cstdint>

#include "bootstrap/socket.hpp"
#include "core/status.hpp"

namespace tessera {

// Listens on `address` (port 0: any) and starts the root thread; `bound` gets the address the
// ranks connect to.
// Starts the root thread. It exits once it has sent the rank table, once the ranks that came
// gave up, or when no rank at all has come within `idleSeconds` (an id nobody uses must not keep
// a thread and a socket for the life of the process).
Result startTcpRoot(const SocketAddress& address, uint64_t nonce, uint32_t version,
                    double idleSeconds, SocketAddress* bound);

}  // namespace tessera
