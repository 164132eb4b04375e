// The 128-byte tsrUniqueId of the TCP bootstrap: where its root listens, plus what lets a rank
// reject an id that is not one (magic, format, checksum) before touching the network.
//
// Layout (little-endian): magic u32 | format u16 | flags u16 | tessera version u32 |
// reserved u32 | nonce u64 | root address (24 bytes, socket.hpp) | zeros | checksum u64 (FNV-1a
// over bytes 0..119).
#pragma once

#include <cstdint>

#include "bootstrap/socket.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"

namespace tessera {

constexpr uint32_t kUniqueIdMagic = 0x49525354;  // "TSRI"
constexpr uint16_t kUniqueIdFormat = 1;

struct UniqueIdContents {
  uint32_t version = 0;  // TESSERA_VERSION_CODE of the process that made the id
  uint64_t nonce = 0;    // random; names this communicator in every hello
  SocketAddress root;
  // TESSERA_COMM_ID: no root runs yet; rank 0 starts it at `root` when it joins, and the other
  // ranks wait for it to listen (flags bit 0; 0 in ids of earlier versions).
  bool rootAtRank0 = false;
};

void encodeUniqueId(const UniqueIdContents& contents, tsrUniqueId* id);
// tsrInvalidArgument ("the unique id is corrupted or not a tessera id ...") on a bad magic,
// checksum, format or address.
Result decodeUniqueId(const tsrUniqueId& id, UniqueIdContents* contents);

}  // namespace tessera
