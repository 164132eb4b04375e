// Revocation notices (DESIGN.md, "Faults and revocation"): how one rank that sees a fault, or
// that revokes or aborts its communicator, tells every other rank of that communicator at once,
// over a path that needs neither the failed rank nor the communicator's transports.
//
// Each process runs one revoke service while it has communicators: a listening TCP socket on the
// bootstrap's interface (TESSERA_SOCKET_IFNAME, as the TCP bootstrap picks it) and one thread that
// accepts notices and hands each to the rank it names. A communicator learns every rank's service
// address at init (with the placements) and a random id (rank 0's) that names it in notices. A
// notice goes straight to every other rank, all connections at once, each within a short deadline:
// a dead or unreachable rank costs the sender that deadline, never more, and delays no one else.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace tessera {

// A service address in wire form (bootstrap/socket.hpp's encoding); all zero: none (that rank's
// service could not start, so it gets no notices).
using RevokeAddress = std::array<uint8_t, 24>;

struct RevokeNotice {
  uint64_t commId = 0;  // the communicator (its rank 0's random id)
  int toRank = -1;      // the receiving rank of that communicator
  int fromRank = -1;    // the rank that revoked it
  Result code = tsrRemoteError;
  std::string why;  // the sender's sentence: what it saw (at most kRevokeWhyBytes - 1 bytes)
};
inline constexpr size_t kRevokeWhyBytes = 448;

// Receives the notices of one rank of one communicator (CommImpl). Called on the service's
// thread; it must not wait for anything that waits for the service.
class RevokeSink {
 public:
  virtual ~RevokeSink() = default;
  virtual void revokedByPeer(const RevokeNotice& notice) = 0;
};

// One rank's membership of the process's revoke service. Making the first one starts the service;
// destroying the last one stops it (its thread joined, its socket closed), so a process without
// communicators holds no descriptor for it.
class RevokeEndpoint {
 public:
  // Joins the service (unless TESSERA_REVOKE_NOTICES=0). When it cannot start (no interface, no
  // descriptors), the endpoint's address is all zero and the reason was logged at INFO: that rank
  // gets no notices (it still learns of faults from its own peers and deadlines) and can still send
  // them.
  static std::unique_ptr<RevokeEndpoint> open();
  ~RevokeEndpoint();
  RevokeEndpoint(const RevokeEndpoint&) = delete;
  RevokeEndpoint& operator=(const RevokeEndpoint&) = delete;

  const RevokeAddress& address() const { return address_; }
  // Notices for (commId, rank) go to `sink` from now on, until detach() or the destructor (which
  // waits for a delivery in progress to end).
  void attach(uint64_t commId, int rank, RevokeSink* sink);
  void detach();

 private:
  RevokeEndpoint() = default;
  RevokeAddress address_{};
  bool joined_ = false;
  bool attached_ = false;
  uint64_t commId_ = 0;
  int rank_ = -1;
};

// Sends `notice` (its toRank set per peer) to every rank in `peers` but `notice.fromRank` and
// those with no address, all at once; gives up on a peer that has not taken it within `seconds`.
// Returns how many peers took it.
int sendRevokeNotices(const std::vector<RevokeAddress>& peers, RevokeNotice notice, double seconds);

// TESSERA_REVOKE_NOTICES (default 1): 0 makes no endpoint join the service and no rank send
// notices (faults are then learned from peers and deadlines only, as before revocation existed).
bool revokeNoticesEnabled();

// Tests: the service's thread and socket exist (a communicator holds an endpoint).
bool revokeServiceRunning();

}  // namespace tessera
