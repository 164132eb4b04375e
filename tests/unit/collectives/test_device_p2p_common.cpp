#include "test_device_p2p_common.hpp"

#include <algorithm>
#include <random>

#include "core/datatype.hpp"

namespace tessera::p2ptest {

Result makeP2PEngine(TransportContext& ctx, const P2PSetup& setup,
                     std::unique_ptr<CollectiveEngine>* out) {
  EngineOptions o;
  o.transports = &ctx;
  o.rank = ctx.rank();
  o.nranks = ctx.nranks();
  o.timeoutSeconds = setup.timeoutSeconds;
  o.scratchBytes = setup.scratchBytes;
  o.deviceEmulation = true;
  o.minCtas = o.maxCtas = setup.ctas;
  o.deviceP2PSlotBytes = setup.slotBytes;
  return CollectiveEngine::create(o, out);
}

uint8_t patternByte(int from, int to, size_t k, size_t i, uint32_t round) {
  // splitmix64 of the coordinates: neighbouring bytes, messages and rounds all differ.
  uint64_t z = (static_cast<uint64_t>(from) << 48) ^ (static_cast<uint64_t>(to) << 36) ^
               (static_cast<uint64_t>(k) << 28) ^ (static_cast<uint64_t>(round) << 20) ^ i;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint8_t>(z ^ (z >> 31));
}

Exchange::Exchange(int rank, int nranks, const Spec& spec, uint32_t round, uint32_t seed)
    : rank_(rank), round_(round) {
  std::vector<std::vector<P2PCall>> queues;  // per (peer, direction), in order
  for (int p = 0; p < nranks; ++p) {
    std::vector<Msg> out = spec(rank, p), in = spec(p, rank);
    for (size_t k = 0; k < out.size(); ++k) {
      const size_t bytes = out[k].count * dtypeSize(out[k].dtype);
      Buf b{p, k, bytes, std::vector<uint8_t>(bytes)};
      for (size_t i = 0; i < bytes; ++i) b.data[i] = patternByte(rank, p, k, i, round);
      sends_.push_back(std::move(b));
    }
    for (size_t k = 0; k < in.size(); ++k) {
      const size_t bytes = in[k].count * dtypeSize(in[k].dtype);
      recvs_.push_back(Buf{p, k, bytes, std::vector<uint8_t>(bytes + kGuardBytes, kGuard)});
    }
  }
  // Pointers only now: the vectors above no longer move.
  size_t s = 0, r = 0;
  for (int p = 0; p < nranks; ++p) {
    std::vector<Msg> out = spec(rank, p), in = spec(p, rank);
    std::vector<P2PCall> sendQ, recvQ;
    for (const Msg& m : out)
      sendQ.push_back(P2PCall{true, p, sends_[s++].data.data(), nullptr, m.count, m.dtype});
    for (const Msg& m : in)
      recvQ.push_back(P2PCall{false, p, nullptr, recvs_[r++].data.data(), m.count, m.dtype});
    queues.push_back(std::move(sendQ));
    queues.push_back(std::move(recvQ));
  }
  if (seed == 0) {
    for (const auto& q : queues) calls_.insert(calls_.end(), q.begin(), q.end());
    return;
  }
  // A random merge that keeps each queue's order (the order that matters for matching).
  std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(rank));
  std::vector<size_t> at(queues.size(), 0);
  size_t left = 0;
  for (const auto& q : queues) left += q.size();
  for (; left > 0; --left) {
    size_t q;
    do q = rng() % queues.size();
    while (at[q] == queues[q].size());
    calls_.push_back(queues[q][at[q]++]);
  }
}

std::string Exchange::check() const {
  for (const Buf& b : recvs_) {
    for (size_t i = 0; i < b.bytes; ++i) {
      const uint8_t want = patternByte(b.peer, rank_, b.k, i, round_);
      if (b.data[i] != want)
        return strprintf(
            "rank %d: message %zu from rank %d (%zu bytes), byte %zu is 0x%02x, expected 0x%02x",
            rank_, b.k, b.peer, b.bytes, i, b.data[i], want);
    }
    for (size_t i = b.bytes; i < b.data.size(); ++i)
      if (b.data[i] != kGuard)
        return strprintf(
            "rank %d: message %zu from rank %d (%zu bytes) wrote byte %zu past its end", rank_, b.k,
            b.peer, b.bytes, i - b.bytes);
  }
  for (const Buf& b : sends_)
    for (size_t i = 0; i < b.bytes; ++i)
      if (b.data[i] != patternByte(rank_, b.peer, b.k, i, round_))
        return strprintf("rank %d: send buffer of message %zu to rank %d was modified at byte %zu",
                         rank_, b.k, b.peer, i);
  return "";
}

Result runDeviceP2P(CollectiveEngine& e, const std::vector<P2PCall>& calls) {
  Result r = e.enqueueP2P(calls, nullptr);
  return r == tsrSuccess ? e.deviceSynchronize() : r;
}

std::string runExchange(CollectiveEngine& e, int rank, int nranks, const Spec& spec, uint32_t round,
                        uint32_t seed) {
  Exchange x(rank, nranks, spec, round, seed);
  Result r = runDeviceP2P(e, x.calls());
  if (r != tsrSuccess)
    return strprintf("rank %d round %u: %s: %s", rank, round, resultName(r), lastErrorMessage());
  return x.check();
}

}  // namespace tessera::p2ptest
