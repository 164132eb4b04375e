// What the TCP bootstrap sends on its sockets (little-endian, fixed layouts).
//
// Rank -> root:  RootHello.
// Root -> rank:  RootReply, then nranks wire addresses (kRootOk) or textBytes of a sentence.
// Rank -> peer:  PeerHello once per connection, then frames: FrameHeader + bytes of payload.
#pragma once

#include <cstdint>

#include "bootstrap/socket.hpp"

namespace tessera {

constexpr uint32_t kRootHelloMagic = 0x48525354;  // "TSRH"
constexpr uint32_t kRootReplyMagic = 0x52525354;  // "TSRR"
constexpr uint32_t kPeerHelloMagic = 0x50525354;  // "TSRP"
constexpr uint32_t kFrameMagic = 0x46525354;      // "TSRF"
constexpr uint32_t kTcpProtocol = 1;

struct RootHello {
  uint32_t magic;
  uint32_t protocol;
  uint32_t version;  // TESSERA_VERSION_CODE of the rank
  int32_t rank;
  int32_t nranks;
  uint32_t timeoutMs;  // how long the rank waits for the table; the root gives up a bit earlier
  uint64_t nonce;
  uint8_t address[kWireAddressBytes];  // where the rank listens for its peers
};
static_assert(sizeof(RootHello) == 56);

enum RootStatus : uint32_t {
  kRootOk = 0,
  kRootRejected = 1,  // this rank's hello was refused (version, nonce, rank, nranks)
  kRootTimeout = 2,   // not every rank arrived in time
  kRootFailed = 3,    // another rank was refused, so the communicator cannot form
};

struct RootReply {
  uint32_t magic;
  uint32_t status;
  int32_t nranks;
  uint32_t textBytes;
};
static_assert(sizeof(RootReply) == 16);

struct PeerHello {
  uint32_t magic;
  int32_t source;
  int32_t destination;
  uint32_t reserved;
  uint64_t nonce;
};
static_assert(sizeof(PeerHello) == 24);

struct FrameHeader {
  uint32_t magic;
  int32_t source;
  int32_t tag;
  uint32_t reserved;
  uint64_t bytes;
};
static_assert(sizeof(FrameHeader) == 24);

// Larger messages are refused: the bootstrap carries small blobs. (A receiver also grows its
// buffer only as bytes arrive, so a corrupted size never turns into a huge allocation.)
constexpr uint64_t kMaxMessageBytes = 256ull << 20;

}  // namespace tessera
