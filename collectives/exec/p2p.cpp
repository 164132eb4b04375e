// Sends and receives of one group (engine.hpp, startP2P). Each ordered pair of ranks has a ring of
// kP2PSlots slots in the receiver's inbox (P2PLink, made on first use): the sender writes a
// piece (a header and up to kP2PSlotBytes of data) into the next slot when it holds a credit,
// then signals `data`; the receiver copies the piece out and signals `ack`, which returns the
// credit. Counters persist across groups, so a slot is never reused before it was drained.
// Sends to one peer go in call order, one after the other, and so do receives from one peer: the
// k-th send to p meets p's k-th receive from this rank. A message of 0 bytes still sends one
// header, so a size mismatch is reported instead of hanging. Sends to self are copied at once in
// this rank's turn, matched in order with the receives from self of the same group.
#include <algorithm>
#include <cstring>

#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/host_ops.hpp"
#include "collectives/exec/protocols.hpp"
#include "core/datatype.hpp"
#include "core/park.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

struct PieceHeader {
  uint64_t messageBytes;
  uint64_t offset;
  uint64_t bytes;
};
constexpr size_t kSlotStride = kP2PSlotBytes + kP2PHeaderBytes;

struct Transfer {
  const char* src = nullptr;  // send
  char* dst = nullptr;        // receive
  size_t bytes = 0;
  size_t done = 0;
  bool any = false;  // a piece moved (a 0-byte message moves one)
  bool finished() const { return any && done == bytes; }
};

class P2POperation final : public TurnOperation {
 public:
  P2POperation(EngineImpl* e, uint64_t groupNo) : TurnOperation(e), groupNo_(groupNo) {
    sends_.resize(static_cast<size_t>(e->nranks()));
    recvs_.resize(static_cast<size_t>(e->nranks()));
    sendAt_.assign(static_cast<size_t>(e->nranks()), 0);
    recvAt_.assign(static_cast<size_t>(e->nranks()), 0);
  }
  ~P2POperation() override {
    if (!done_ && failed_ == tsrSuccess) e_->abandoned(describe());
  }
  // Setup failed before the operation was handed out (the engine is poisoned already). Its turn
  // is left as it is: no later operation can start on a poisoned engine, and ending the turn
  // now, before it is this operation's, would end an earlier operation's that still runs.
  void abandon(Result code) { failed_ = code; }

  std::vector<std::vector<Transfer>> sends_, recvs_;  // by peer, in call order
  std::vector<std::pair<Transfer, Transfer>> self_;   // (send, receive) pairs
  std::vector<P2PLink*> links_;                       // by peer; null when unused

  Result progress(bool* done) override {
    if (Result r; !inTurn(done, &r)) return r;
    if (!selfDone_) {
      for (auto& [s, r] : self_) hostCopyBytes(r.dst, nullptr, s.src, s.bytes);
      selfDone_ = true;
      markMoved();
    }
    for (;;) {
      bool any = false, all = true;
      for (size_t p = 0; p < sends_.size(); ++p) {
        if (Result r = pump(p, &any, &all); r != tsrSuccess) return failInTurn(r);
      }
      if (all) {
        if (!e_->bounce().dirty.empty()) {
          if (Result r = e_->flushDirty(); r != tsrSuccess) return failInTurn(r);
        }
        done_ = true;
        markMoved();
        e_->endTurn();
        *done = true;
        return tsrSuccess;
      }
      if (!any) break;
      markMoved();
    }
    if (moved_) return tsrSuccess;
    if (Result r = e_->idle(&idle_, *this); r != tsrSuccess) return failInTurn(r);
    return tsrSuccess;
  }

  std::string describe() const override {
    size_t n = self_.size() * 2;
    for (size_t p = 0; p < sends_.size(); ++p) n += sends_[p].size() + recvs_[p].size();
    return strprintf("send/recv group of %zu calls (group %llu)", n,
                     static_cast<unsigned long long>(groupNo_));
  }

  Result checkPeers() const override {
    for (size_t p = 0; p < sends_.size(); ++p)
      if (sendAt_[p] < sends_[p].size() || recvAt_[p] < recvs_[p].size())
        TSR_CHECK(links_[p]->connection->peerStatus());
    return tsrSuccess;
  }

  bool parkWords(ParkSet* set) const override {
    if (!waitingInTurn()) return true;
    for (size_t p = 0; p < sends_.size(); ++p) {
      const P2PLink* link = links_[p];
      if (sendAt_[p] < sends_[p].size() && !link->ack->addParkWord(set)) return false;
      if (recvAt_[p] < recvs_[p].size() && !link->data->addParkWord(set)) return false;
    }
    return true;
  }

  const std::vector<int>* dumpPeers() const override { return e_->peerPids(); }
  std::string blocked() const override {
    std::string head = strprintf("%s: rank %d ", describe().c_str(), e_->rank());
    if (std::string earlier = waitsForEarlier(head); !earlier.empty()) return earlier;
    for (size_t p = 0; p < sends_.size(); ++p) {
      if (sendAt_[p] < sends_[p].size())
        return head + strprintf(
                          "waits to send %zu of %zu bytes to rank %zu (credits: slot %llu "
                          "of %d acknowledged up to %llu)",
                          sends_[p][sendAt_[p]].bytes - sends_[p][sendAt_[p]].done,
                          sends_[p][sendAt_[p]].bytes, p,
                          static_cast<unsigned long long>(links_[p]->sent), kP2PSlots,
                          static_cast<unsigned long long>(links_[p]->acked));
      if (recvAt_[p] < recvs_[p].size())
        return head + strprintf("waits to receive %zu of %zu bytes from rank %zu",
                                recvs_[p][recvAt_[p]].bytes - recvs_[p][recvAt_[p]].done,
                                recvs_[p][recvAt_[p]].bytes, p);
    }
    return head + "has nothing pending";
  }

 private:
  Result pump(size_t p, bool* any, bool* all) {
    P2PLink* link = links_[p];
    // Sends: as many pieces as credits allow.
    while (sendAt_[p] < sends_[p].size()) {
      Transfer& t = sends_[p][sendAt_[p]];
      if (!proto::ringHasCredit(link->sent, link->acked, kP2PSlots)) {
        if (!link->ack->poll()) break;
        ++link->acked;
      }
      TSR_CHECK(sendPiece(link, &t));
      *any = true;
      if (t.finished()) ++sendAt_[p];
    }
    // Receives: drain what arrived.
    while (recvAt_[p] < recvs_[p].size()) {
      Transfer& t = recvs_[p][recvAt_[p]];
      if (!link->data->poll()) break;
      TSR_CHECK(recvPiece(static_cast<int>(p), link, &t));
      *any = true;
      if (t.finished()) ++recvAt_[p];
    }
    *all = *all && sendAt_[p] == sends_[p].size() && recvAt_[p] == recvs_[p].size();
    return tsrSuccess;
  }

  Result sendPiece(P2PLink* link, Transfer* t) {
    size_t n = std::min(kP2PSlotBytes, t->bytes - t->done);
    PieceHeader h{t->bytes, t->done, n};
    size_t slot = static_cast<size_t>(proto::ringSlot(link->sent, kP2PSlots)) * kSlotStride;
    if (link->mapped) {
      char* dst = static_cast<char*>(link->peerInbox->mapped()) + slot;
      std::memcpy(dst, &h, sizeof h);
      hostCopyBytes(dst + kP2PHeaderBytes, nullptr, t->src + t->done, n);
    } else {
      size_t off = 0;
      TSR_CHECK(e_->stageStore(kP2PHeaderBytes + n, &off));
      Bounce& b = e_->bounce();
      std::memcpy(b.base + off, &h, sizeof h);
      std::memcpy(b.base + off + kP2PHeaderBytes, t->src + t->done, n);
      TSR_CHECK(link->connection->put(*link->peerInbox, slot, *b.memory, off, kP2PHeaderBytes + n));
      e_->markDirty(link->connection.get());
    }
    TSR_CHECK(link->data->signal());
    ++link->sent;
    t->done += n;
    t->any = true;
    return tsrSuccess;
  }

  Result recvPiece(int peer, P2PLink* link, Transfer* t) {
    const char* src = static_cast<const char*>(link->inbox->data()) +
                      static_cast<size_t>(proto::ringSlot(link->received, kP2PSlots)) * kSlotStride;
    PieceHeader h;
    std::memcpy(&h, src, sizeof h);
    if (h.messageBytes != t->bytes)
      return TSR_FAIL(tsrInvalidUsage,
                      "%s: rank %d receives %zu bytes from rank %d, which sends %llu bytes",
                      describe().c_str(), e_->rank(), t->bytes, peer,
                      static_cast<unsigned long long>(h.messageBytes));
    if (h.offset != t->done || h.bytes > t->bytes - t->done)
      return TSR_FAIL(tsrInternalError, "%s: rank %d got a piece out of order from rank %d",
                      describe().c_str(), e_->rank(), peer);
    hostCopyBytes(t->dst + t->done, nullptr, src + kP2PHeaderBytes, h.bytes);
    ++link->received;
    TSR_CHECK(link->ack->signal());
    if (!link->mapped) e_->markDirty(link->connection.get());
    t->done += h.bytes;
    t->any = true;
    return tsrSuccess;
  }

  uint64_t groupNo_;
  bool selfDone_ = false;
  std::vector<size_t> sendAt_, recvAt_;
};

// tsrProbe: in its turn (after this engine's earlier operations), looks at the links it names for
// a piece that arrived and was not drained yet; the first piece of the next message (a receive
// drains whole messages) gives its sender and size. Nothing is consumed.
class ProbeOperation final : public TurnOperation {
 public:
  ProbeOperation(EngineImpl* e, CollectiveEngine::Probe* found) : TurnOperation(e), found_(found) {}
  ~ProbeOperation() override {
    if (!done_ && failed_ == tsrSuccess) e_->abandoned(describe());
  }

  bool any_ = false;
  std::vector<P2PLink*> links_;  // by peer; null: not looked at

  Result progress(bool* done) override {
    if (Result r; !inTurn(done, &r)) return r;
    const int n = static_cast<int>(links_.size());
    for (int k = 0; k < n; ++k) {
      const int p = any_ ? (e_->probeFrom_ + k) % n : k;
      P2PLink* link = links_[static_cast<size_t>(p)];
      if (link == nullptr || link->data->received() <= link->data->consumed()) continue;
      PieceHeader h;
      std::memcpy(&h,
                  static_cast<const char*>(link->inbox->data()) +
                      static_cast<size_t>(proto::ringSlot(link->received, kP2PSlots)) * kSlotStride,
                  sizeof h);
      if (h.offset != 0)
        return failInTurn(
            TSR_FAIL(tsrInternalError,
                     "%s: rank %d found the middle of a message from rank %d (offset %llu)",
                     describe().c_str(), e_->rank(), p, static_cast<unsigned long long>(h.offset)));
      found_->source = p;
      found_->bytes = static_cast<size_t>(h.messageBytes);
      if (any_) e_->probeFrom_ = (p + 1) % n;
      done_ = true;
      markMoved();
      e_->endTurn();
      *done = true;
      return tsrSuccess;
    }
    if (Result r = e_->idle(&idle_, *this); r != tsrSuccess) return failInTurn(r);
    return tsrSuccess;
  }

  std::string describe() const override {
    if (!any_)
      for (size_t p = 0; p < links_.size(); ++p)
        if (links_[p] != nullptr) return strprintf("probe for a message from rank %zu", p);
    return "probe for a message from any rank";
  }

  // A probe of one peer needs it; one of any source fails only once every linked peer is gone
  // (a peer that finished its part may leave while another still has something to send).
  Result checkPeers() const override {
    Result last = tsrSuccess;
    for (const P2PLink* link : links_) {
      if (link == nullptr) continue;
      Result r = link->connection->peerStatus();
      if (r == tsrSuccess) return tsrSuccess;
      last = r;
    }
    return last;
  }

  bool parkWords(ParkSet* set) const override {
    if (!waitingInTurn()) return true;
    for (const P2PLink* link : links_)
      if (link != nullptr && !link->data->addParkWord(set)) return false;
    return true;
  }

  const std::vector<int>* dumpPeers() const override { return e_->peerPids(); }
  std::string blocked() const override {
    std::string head = strprintf("%s: rank %d ", describe().c_str(), e_->rank());
    if (std::string earlier = waitsForEarlier(head); !earlier.empty()) return earlier;
    std::string ranks;
    for (size_t p = 0; p < links_.size(); ++p)
      if (links_[p] != nullptr) ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
    return head + "waits for a message from rank(s) " + ranks;
  }

 private:
  CollectiveEngine::Probe* found_;
};

}  // namespace

Result EngineImpl::startProbe(int peer, Probe* found, std::unique_ptr<Operation>* out) {
  TSR_CHECK(alive());
  std::vector<P2PLink*> links(static_cast<size_t>(nranks_), nullptr);
  if (peer != kAnySource) {
    Result r = p2pLink(peer, &links[static_cast<size_t>(peer)]);
    if (r != tsrSuccess) return poison(r);  // as startP2P: a half-made link is not reused
  } else {
    int linked = 0;
    for (int p = 0; p < nranks_; ++p) {
      if (p == rank_ || p2p_[static_cast<size_t>(p)] == nullptr) continue;
      links[static_cast<size_t>(p)] = p2p_[static_cast<size_t>(p)].get();
      ++linked;
    }
    if (linked == 0)  // nothing could ever arrive: a sentence now, not a wait for the deadline
      return TSR_FAIL(tsrInvalidUsage,
                      "tsrProbe: rank %d probes for a message from any rank but has exchanged "
                      "no message with any rank yet (a pair's first send or receive sets up its "
                      "link, both ranks taking part)",
                      rank_);
  }
  // The turn is taken only now: an operation that is never run must not hold up later ones.
  auto op = std::make_unique<ProbeOperation>(this, found);
  op->links_ = std::move(links);
  op->any_ = peer == kAnySource;
  *out = std::move(op);
  return tsrSuccess;
}

Result EngineImpl::startP2P(const std::vector<P2PCall>& calls, std::unique_ptr<Operation>* out) {
  TSR_CHECK(alive());
  TSR_CHECK(planner_.admitP2P(calls));
  std::vector<Transfer> selfSends, selfRecvs;
  for (const P2PCall& c : calls) {
    Transfer t;
    t.bytes = c.count * dtypeSize(c.dtype);
    t.src = static_cast<const char*>(c.sendbuf);
    t.dst = static_cast<char*>(c.recvbuf);
    if (c.peer == rank_) (c.isSend ? selfSends : selfRecvs).push_back(t);
  }
  auto op = std::make_unique<P2POperation>(this, ++p2pGroups_);
  for (size_t i = 0; i < selfSends.size(); ++i) op->self_.emplace_back(selfSends[i], selfRecvs[i]);
  for (const P2PCall& c : calls) {
    if (c.peer == rank_) continue;
    Transfer t;
    t.bytes = c.count * dtypeSize(c.dtype);
    t.src = static_cast<const char*>(c.sendbuf);
    t.dst = static_cast<char*>(c.recvbuf);
    (c.isSend ? op->sends_ : op->recvs_)[static_cast<size_t>(c.peer)].push_back(t);
  }
  // Links in increasing peer order (see bind.cpp: the pairwise setup cannot deadlock).
  op->links_.assign(static_cast<size_t>(nranks_), nullptr);
  for (int p = 0; p < nranks_; ++p) {
    if (op->sends_[static_cast<size_t>(p)].empty() && op->recvs_[static_cast<size_t>(p)].empty())
      continue;
    Result r = p2pLink(p, &op->links_[static_cast<size_t>(p)]);
    if (r != tsrSuccess) {
      op->abandon(r);
      return poison(r);
    }
  }
  *out = std::move(op);
  return tsrSuccess;
}

}  // namespace tessera
