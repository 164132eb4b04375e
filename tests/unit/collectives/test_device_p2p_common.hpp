// Shared by the tests of the device executor's sends and receives (test_device_p2p*.cpp): an engine
// whose device executor is emulated on host threads (EngineOptions::deviceEmulation) with a chosen
// ring slot size, and exchanges: every rank sends the messages a spec names, receives those named
// for it, in one group, and checks each received byte against a seeded pattern computed from
// (sender, receiver, message, byte, round) alone: a reference independent of the code under test.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/exec/engine.hpp"
#include "transport/context.hpp"

namespace tessera::p2ptest {

struct P2PSetup {
  size_t slotBytes = 0;  // payload per ring slot; 0: the default (64 KiB)
  double timeoutSeconds = 20;
  int ctas = 2;
  size_t scratchBytes = 8 << 10;  // for the collectives mixed in
};

Result makeP2PEngine(TransportContext& ctx, const P2PSetup& setup,
                     std::unique_ptr<CollectiveEngine>* out);

struct Msg {
  size_t count;
  tsrDataType_t dtype;
};
// The messages rank `from` sends to rank `to`, in order; every rank computes the same.
using Spec = std::function<std::vector<Msg>(int from, int to)>;

// Byte i of message k from `from` to `to` in round `round`.
uint8_t patternByte(int from, int to, size_t k, size_t i, uint32_t round);

// One rank's part of an exchange: its send buffers (filled with the pattern), its receive buffers
// (each followed by guard bytes), and the calls, in an order shuffled with `seed` (0: per peer,
// the sends to it then the receives from it).
class Exchange {
 public:
  Exchange(int rank, int nranks, const Spec& spec, uint32_t round, uint32_t seed);
  const std::vector<P2PCall>& calls() const { return calls_; }
  // "" when every receive holds its message exactly, nothing was written past a receive's end and
  // the send buffers are unchanged; else the first difference.
  std::string check() const;

 private:
  struct Buf {
    int peer;
    size_t k;
    size_t bytes;
    std::vector<uint8_t> data;
  };
  int rank_;
  uint32_t round_;
  std::vector<Buf> sends_, recvs_;
  std::vector<P2PCall> calls_;
};

inline constexpr size_t kGuardBytes = 64;
inline constexpr uint8_t kGuard = 0xA5;

// Runs the rank's exchange as one group (enqueueP2P + deviceSynchronize) and checks it.
std::string runExchange(CollectiveEngine& e, int rank, int nranks, const Spec& spec, uint32_t round,
                        uint32_t seed);

// enqueueP2P then deviceSynchronize.
Result runDeviceP2P(CollectiveEngine& e, const std::vector<P2PCall>& calls);

}  // namespace tessera::p2ptest
