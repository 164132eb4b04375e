// TCP bootstrap (unique id): like ncclGetUniqueId / ncclCommInitRank.
//
//   tsrUniqueId id;
//   createUniqueId(&id);                      // one process; starts the root there
//   ... hand `id` to every rank (MPI_Bcast, a file, fork) ...
//   TcpBootstrap::create(id, rank, nranks, options, &bootstrap);   // every rank
//
// Ranks may be processes or threads of one process. After the root has handed out the table of
// listen addresses, ranks talk directly: one persistent connection per (sender, receiver) pair,
// opened by the sender on first use. A rank waiting for anything keeps reading what arrives, so
// two ranks that send each other large messages before receiving do not deadlock.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/tcp_wire.hpp"
#include "tessera/tessera.h"

namespace tessera {

// Starts a root in this process (TESSERA_SOCKET_IFNAME / TESSERA_SOCKET_FAMILY pick its
// address) and describes it in `id`. The id serves one communicator.
Result createUniqueId(tsrUniqueId* id);
// tsrGetUniqueId's id. With TESSERA_COMM_ID (or NCCL_COMM_ID through its alias) set: an id naming
// that address, the same in every process that calls it (its nonce is a hash of the value), and
// no root: rank 0 starts it in TcpBootstrap::create. Otherwise createUniqueId's. Ids made inside
// tessera (split children) use createUniqueId: one fixed address cannot serve communicators
// forming at the same time.
Result createUserUniqueId(tsrUniqueId* id);

class TcpBootstrap final : public Bootstrap {
 public:
  // Checks the id (garbage: tsrInvalidArgument at once), connects to its root (a root that
  // refuses for ~2 s is gone: tsrRemoteError), announces itself and waits for the table of all
  // ranks or for the root's sentence saying why not (tsrInvalidArgument: this rank was refused;
  // tsrTimeout: ranks missing, named; tsrRemoteError: another rank was refused).
  static Result create(const tsrUniqueId& id, int rank, int nranks, const BootstrapOptions& options,
                       std::unique_ptr<Bootstrap>* out);
  ~TcpBootstrap() override;
  const char* kind() const override { return "tcp"; }

 protected:
  Result doAllGather(void* data, size_t bytesPerRank, const Deadline& deadline) override;
  Result doSend(int peer, int tag, const void* data, size_t bytes,
                const Deadline& deadline) override;
  Result doRecv(int peer, int tag, void* data, size_t bytes, const Deadline& deadline) override;
  Result doBarrier(const Deadline& deadline) override;
  Result doBroadcast(void* data, size_t bytes, int root, const Deadline& deadline) override;
  void doAbort() override;
  Result splitPrepare(int childSize, uint8_t payload[kSplitPayloadBytes]) override;
  Result splitJoin(const uint8_t payload[kSplitPayloadBytes], int childRank, int childSize,
                   std::unique_ptr<Bootstrap>* child) override;

 private:
  // tests/fuzz/fuzz_bootstrap_wire.cpp drives the reading code below without a root or sockets.
  friend struct TcpBootstrapWireFuzz;

  // A connection a peer opened to us, over which it sends us frames.
  struct Inbound {
    int fd = -1;
    bool ended = false;  // EOF, reset or a corrupted stream: nothing more will come
    std::string endedWhy;
    FrameHeader header{};
    size_t headerGot = 0;
    std::vector<uint8_t> payload;
    size_t payloadGot = 0;
  };
  // An accepted connection whose PeerHello has not fully arrived.
  struct Accepted {
    int fd = -1;
    PeerHello hello{};
    size_t got = 0;
    Clock::time_point since;  // a connection silent for too long is not a rank: dropped
  };

  TcpBootstrap(int rank, int nranks, double timeout, uint64_t nonce, int listenFd, int wakeFd,
               std::vector<SocketAddress> peers);

  // The internal collectives use negative tags, out of the users' way.
  static constexpr int kTagAllGather = -1;
  static constexpr int kTagBarrier = -2;
  static constexpr int kTagBroadcast = -3;

  Result sendMessage(int peer, int tag, const void* data, size_t bytes, const Deadline& deadline,
                     const std::string& what);
  Result receiveMessage(int peer, int tag, void* data, size_t bytes, const Deadline& deadline,
                        const std::string& what);
  Result connectPeer(int peer, const Deadline& deadline, const std::string& what);
  Result writeToPeer(int peer, const void* data, size_t bytes, const Deadline& deadline,
                     const std::string& what);
  // One round of waiting: accepts connections, reads hellos and frames; returns when something
  // happened, the deadline passed, or (writeFd >= 0) writeFd became writable.
  Result progress(const Deadline& deadline, int writeFd, const std::string& what);
  void acceptConnections();
  void readHello(Accepted& a);
  void readFrames(int peer);
  void endInbound(int peer, const std::string& why);
  void dropFd(int* fd);

  uint64_t nonce_;
  // Held where descriptors are stored or closed, so abort() (any thread) never shuts down a
  // descriptor number that was closed and reused.
  std::mutex fdMutex_;
  int listenFd_;
  int wakeFd_;
  std::vector<SocketAddress> peers_;
  std::vector<int> outbound_;  // our connection to each peer (-1: not yet)
  std::vector<Inbound> inbound_;
  std::vector<Accepted> accepted_;
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> mailbox_;  // (peer, tag)
};

}  // namespace tessera
