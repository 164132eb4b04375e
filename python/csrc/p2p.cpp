#include "p2p.hpp"

#include <ATen/ATen.h>

#include <string>

#include "types.hpp"

namespace tessera_torch {
namespace {

at::Tensor bytesOf(const at::Tensor& t) {
  return t.view({-1}).view(at::kByte);  // contiguous: its storage bytes, in order
}

std::string where(int rank, int peer, int64_t tag) {
  return "rank " + std::to_string(rank) + ", message from rank " + std::to_string(peer) +
         " with tag " + std::to_string(tag);
}

}  // namespace

P2P::P2P(tsrComm_t comm, int rank, int nranks, std::function<tsrComm_t(int, int)> deviceComm,
         std::function<void*(int)> stream)
    : comm_(comm),
      rank_(rank),
      nranks_(nranks),
      deviceComm_(std::move(deviceComm)),
      stream_(std::move(stream)),
      stash_(static_cast<size_t>(nranks)) {}

tsrComm_t P2P::payloadComm(int peer, bool onDevice, int device, void** stream) {
  *stream = nullptr;
  if (!onDevice) return comm_;
  *stream = stream_(device);
  return deviceComm_(peer, device);
}

void P2P::sendPayload(const P2POp& op) {
  const size_t bytes = tensorBytes(op.tensor);
  if (bytes == 0) return;
  void* stream = nullptr;
  const bool dev = op.tensor.is_cuda();
  tsrComm_t c = payloadComm(op.peer, dev, dev ? op.tensor.get_device() : -1, &stream);
  // On the pair's communicator the peer is rank 0 or 1 (the lower global rank is 0).
  const int peer = dev ? (op.peer < rank_ ? 0 : 1) : op.peer;
  check(tsrSend(op.tensor.data_ptr(), bytes, tsrUint8, peer, c, static_cast<tsrStream_t>(stream)),
        "tsrSend");
}

void P2P::recvPayload(const Incoming& in) {
  const size_t bytes = in.header.bytes;
  if (bytes == 0) return;
  void* stream = nullptr;
  const bool dev = in.header.device != 0;
  tsrComm_t c = payloadComm(in.peer, dev, dev ? in.dst.get_device() : -1, &stream);
  const int peer = dev ? (in.peer < rank_ ? 0 : 1) : in.peer;
  check(tsrRecv(in.dst.data_ptr(), bytes, tsrUint8, peer, c, static_cast<tsrStream_t>(stream)),
        "tsrRecv");
}

void P2P::assign(Incoming* in, std::vector<Want>& wants, const at::TensorOptions& hostOptions) {
  for (Want& w : wants) {
    if (w.done || w.op->peer != in->peer || w.op->tag != in->header.tag) continue;
    const size_t want = tensorBytes(w.op->tensor);
    const bool wantDevice = w.op->tensor.is_cuda();
    if (want != in->header.bytes || wantDevice != (in->header.device != 0)) break;  // stash it
    in->dst = w.op->tensor;
    w.done = true;
    return;
  }
  // No receive of this tag is open (or the first one does not fit: it is kept, and the receive
  // fails below with both sizes).
  in->stashed = true;
  if (in->header.device != 0) {
    // The payload arrives on the device of this rank's receives from that peer, if any; else the
    // current device.
    int device = -1;
    for (Want& w : wants)
      if (w.op->peer == in->peer && w.op->tensor.is_cuda()) device = w.op->tensor.get_device();
    auto opts =
        hostOptions.device(device >= 0 ? c10::Device(c10::kCUDA, device) : c10::Device(c10::kCUDA));
    in->dst = at::empty({static_cast<int64_t>(in->header.bytes)}, opts);
  } else {
    in->dst = at::empty({static_cast<int64_t>(in->header.bytes)}, hostOptions);
  }
}

void P2P::run(std::vector<P2POp>& ops) {
  const auto n = static_cast<size_t>(nranks_);
  const at::TensorOptions hostOptions = at::TensorOptions().dtype(at::kByte);
  std::vector<std::vector<const P2POp*>> sends(n);
  std::vector<Want> wants;
  for (P2POp& op : ops) {
    if (op.isSend && op.peer == rank_) {
      // To self: kept here, as if it had arrived (a copy: the sender may reuse its tensor).
      keep(rank_, op.tag, bytesOf(op.tensor).clone());
      continue;
    }
    if (op.isSend)
      sends[static_cast<size_t>(op.peer)].push_back(&op);
    else
      wants.push_back(Want{&op});
  }

  // Receives that a message kept earlier satisfies (in arrival order per tag).
  for (Want& w : wants) {
    auto& kept = stash_[static_cast<size_t>(w.op->peer)];
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->tag != w.op->tag) continue;
      const size_t bytes = tensorBytes(w.op->tensor);
      if (static_cast<size_t>(it->data.numel()) != bytes)
        throwResult(tsrInvalidUsage, where(rank_, w.op->peer, w.op->tag) + " has " +
                                         std::to_string(it->data.numel()) +
                                         " bytes but the receive expects " + std::to_string(bytes) +
                                         " (" + dtypeName(w.op->tensor.scalar_type()) + ", " +
                                         std::to_string(w.op->tensor.numel()) + " elements)");
      bytesOf(w.op->tensor).copy_(it->data);
      kept.erase(it);
      w.done = true;
      break;
    }
  }
  for (const Want& w : wants)
    if (!w.done && w.op->peer == rank_)
      throwResult(tsrInvalidUsage, "rank " + std::to_string(rank_) +
                                       ": a receive from this rank with tag " +
                                       std::to_string(w.op->tag) +
                                       " has no send to this rank before it (a send to self must "
                                       "come first, or in the same batch)");
  auto openFrom = [&](size_t p) {
    for (const Want& w : wants)
      if (!w.done && static_cast<size_t>(w.op->peer) == p) return true;
    return false;
  };
  bool anyOpen = false;
  for (size_t p = 0; p < n; ++p) anyOpen = anyOpen || openFrom(p);

  // Round 1: the headers of this batch's sends; each peer's next head; payloads too when nothing
  // is received (a send waits for no one's header).
  std::vector<std::vector<Header>> out(n);
  std::vector<Header> heads(n);
  {
    TsrGroup g;
    for (size_t p = 0; p < n; ++p) {
      if (sends[p].empty()) continue;
      for (const P2POp* op : sends[p])
        out[p].push_back(Header{op->tag, tensorBytes(op->tensor),
                                static_cast<uint32_t>(sends[p].size()),
                                op->tensor.is_cuda() ? 1u : 0u, 0});
      const int peer = static_cast<int>(p);
      check(tsrSend(out[p].data(), sizeof(Header), tsrUint8, peer, comm_, nullptr), "tsrSend");
      if (out[p].size() > 1)
        check(tsrSend(out[p].data() + 1, (out[p].size() - 1) * sizeof(Header), tsrUint8, peer,
                      comm_, nullptr),
              "tsrSend");
      if (!anyOpen)
        for (const P2POp* op : sends[p]) sendPayload(*op);
    }
    for (size_t p = 0; p < n && anyOpen; ++p)
      if (openFrom(p))
        check(tsrRecv(&heads[p], sizeof(Header), tsrUint8, static_cast<int>(p), comm_, nullptr),
              "tsrRecv");
    g.end();
  }
  if (!anyOpen) return;

  bool payloadsSent = false;
  std::vector<char> fromPeer(n, 0);
  for (size_t p = 0; p < n; ++p) fromPeer[p] = openFrom(p) ? 1 : 0;
  for (;;) {
    // The rest of each burst whose head arrived.
    std::vector<std::vector<Header>> rest(n);
    {
      TsrGroup g;
      for (size_t p = 0; p < n; ++p) {
        if (!fromPeer[p]) continue;
        if (heads[p].burst == 0)
          throwResult(tsrInternalError, "rank " + std::to_string(rank_) +
                                            ": a message header from rank " + std::to_string(p) +
                                            " says its burst is empty");
        rest[p].resize(heads[p].burst - 1);
        if (!rest[p].empty())
          check(tsrRecv(rest[p].data(), rest[p].size() * sizeof(Header), tsrUint8,
                        static_cast<int>(p), comm_, nullptr),
                "tsrRecv");
      }
      g.end();
    }
    std::vector<Incoming> incoming;
    for (size_t p = 0; p < n; ++p) {
      if (!fromPeer[p]) continue;
      for (size_t i = 0; i <= rest[p].size(); ++i) {
        Incoming in;
        in.header = i == 0 ? heads[p] : rest[p][i - 1];
        in.peer = static_cast<int>(p);
        incoming.push_back(std::move(in));
      }
    }
    for (Incoming& in : incoming) assign(&in, wants, hostOptions);
    // Round 2: payloads both ways.
    {
      TsrGroup g;
      if (!payloadsSent)
        for (size_t p = 0; p < n; ++p)
          for (const P2POp* op : sends[p]) sendPayload(*op);
      payloadsSent = true;
      for (const Incoming& in : incoming) recvPayload(in);
      g.end();
    }
    for (Incoming& in : incoming)
      if (in.stashed) keep(in.peer, in.header.tag, in.dst);
    // A receive whose tag arrived with another size fails (the message stays kept).
    for (const Want& w : wants) {
      if (w.done) continue;
      for (const Incoming& in : incoming)
        if (in.stashed && in.peer == w.op->peer && in.header.tag == w.op->tag)
          throwResult(tsrInvalidUsage,
                      where(rank_, in.peer, in.header.tag) + " has " +
                          std::to_string(in.header.bytes) + (in.header.device ? " CUDA" : " host") +
                          " bytes but the receive expects " +
                          std::to_string(tensorBytes(w.op->tensor)) +
                          (w.op->tensor.is_cuda() ? " CUDA" : " host") + " bytes (" +
                          dtypeName(w.op->tensor.scalar_type()) + ", " +
                          std::to_string(w.op->tensor.numel()) + " elements)");
    }
    anyOpen = false;
    for (size_t p = 0; p < n; ++p) {
      fromPeer[p] = openFrom(p) ? 1 : 0;
      anyOpen = anyOpen || fromPeer[p];
    }
    if (!anyOpen) return;
    // Receives still open: the next burst of each of their peers.
    TsrGroup g;
    for (size_t p = 0; p < n; ++p)
      if (fromPeer[p])
        check(tsrRecv(&heads[p], sizeof(Header), tsrUint8, static_cast<int>(p), comm_, nullptr),
              "tsrRecv");
    g.end();
  }
}

void P2P::connectAll() {
  std::vector<uint8_t> out(static_cast<size_t>(nranks_), 1), in(static_cast<size_t>(nranks_), 0);
  TsrGroup g;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    check(tsrSend(&out[static_cast<size_t>(p)], 1, tsrUint8, p, comm_, nullptr), "tsrSend");
    check(tsrRecv(&in[static_cast<size_t>(p)], 1, tsrUint8, p, comm_, nullptr), "tsrRecv");
  }
  g.end();
}

int P2P::recvAny(const at::Tensor& dst, int tag) {
  const size_t want = tensorBytes(dst);
  auto sizeError = [&](int peer, uint64_t bytes, bool device) {
    throwResult(tsrInvalidUsage, where(rank_, peer, tag) + " has " + std::to_string(bytes) +
                                     (device ? " CUDA" : " host") +
                                     " bytes but the receive from any source expects " +
                                     std::to_string(want) + (dst.is_cuda() ? " CUDA" : " host") +
                                     " bytes (" + dtypeName(dst.scalar_type()) + ", " +
                                     std::to_string(dst.numel()) + " elements)");
  };
  // A message of the tag kept earlier: of each other rank's first one, the earliest to arrive.
  int from = -1;
  std::deque<Stashed>::iterator hit;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    auto& kept = stash_[static_cast<size_t>(p)];
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->tag != tag) continue;
      if (from < 0 || it->arrival < hit->arrival) {
        from = p;
        hit = it;
      }
      break;
    }
  }
  if (from >= 0) {
    if (static_cast<size_t>(hit->data.numel()) != want || hit->data.is_cuda() != dst.is_cuda())
      sizeError(from, static_cast<uint64_t>(hit->data.numel()), hit->data.is_cuda());
    bytesOf(dst).copy_(hit->data);
    stash_[static_cast<size_t>(from)].erase(hit);
    return from;
  }
  const at::TensorOptions hostOptions = at::TensorOptions().dtype(at::kByte);
  std::vector<Want> none;
  for (;;) {
    // The next burst of whichever rank's has arrived, read whole.
    int source = -1;
    size_t bytes = 0;
    check(tsrProbe(TSR_ANY_SOURCE, comm_, &source, &bytes), "tsrProbe");
    if (source < 0 || source >= nranks_ || source == rank_ || bytes != sizeof(Header))
      throwResult(tsrInternalError, "rank " + std::to_string(rank_) +
                                        ": tsrProbe names a message of " + std::to_string(bytes) +
                                        " bytes from rank " + std::to_string(source) +
                                        " where a message header was due");
    Header head;
    check(tsrRecv(&head, sizeof head, tsrUint8, source, comm_, nullptr), "tsrRecv");
    if (head.burst == 0)
      throwResult(tsrInternalError, "rank " + std::to_string(rank_) +
                                        ": a message header from rank " + std::to_string(source) +
                                        " says its burst is empty");
    std::vector<Header> rest(head.burst - 1);
    if (!rest.empty())
      check(tsrRecv(rest.data(), rest.size() * sizeof(Header), tsrUint8, source, comm_, nullptr),
            "tsrRecv");
    std::vector<Incoming> incoming;
    bool matched = false, misfit = false;
    Header misfitHead{};
    for (size_t i = 0; i <= rest.size(); ++i) {
      Incoming in;
      in.header = i == 0 ? head : rest[i - 1];
      in.peer = source;
      if (!matched && !misfit && in.header.tag == tag) {
        if (in.header.bytes == want && (in.header.device != 0) == dst.is_cuda()) {
          in.dst = dst;
          matched = true;
          incoming.push_back(std::move(in));
          continue;
        }
        misfit = true;  // kept (as torch's recv from that rank would find it), then refused
        misfitHead = in.header;
      }
      assign(&in, none, hostOptions);  // no receive open: kept
      incoming.push_back(std::move(in));
    }
    {
      TsrGroup g;
      for (const Incoming& in : incoming) recvPayload(in);
      g.end();
    }
    for (Incoming& in : incoming)
      if (in.stashed) keep(in.peer, in.header.tag, in.dst);
    if (misfit) sizeError(source, misfitHead.bytes, misfitHead.device != 0);
    if (matched) return source;
  }
}

}  // namespace tessera_torch
