// torch's send/recv with tags, over tessera's untagged point-to-point (which matches the k-th send
// to a peer with that peer's k-th receive).
//
// Wire format, per ordered pair of ranks, on the group's p2p communicator: a burst is the
// messages of one batch (one send, or the sends to that peer in one batch_isend_irecv), as
//   [head: Header of the first message, with the burst's length]
//   [rest: the other Headers, when the burst has more than one message]
//   [the payloads, in header order; empty ones are not sent]
// A payload of a CUDA tensor travels instead on the 2-rank device communicator of the pair, in
// header order too. A receiver reads a peer's bursts in order: each message goes to the earliest
// unmatched receive of its tag (torch's, and MPI's, non-overtaking rule), or, when none is posted
// yet, into a stash that a later receive of that tag takes it from.
//
// A batch runs its header sends and the first header receive of each peer in one tessera group,
// then the payload sends and receives in another, so two ranks sending each other large messages
// in one batch never wait for each other. Single sends and receives outside a batch run in issue
// order like every call of the group: as with NCCL, two ranks that each send the other a large
// message before receiving wait for each other (use batch_isend_irecv); small ones (tessera's
// eager slots: 8 of 64 KiB per pair) go through.
//
// Receive from any source (dist.recv without src): a message of the tag kept earlier from any
// other rank (the one that arrived first), else tsrProbe(TSR_ANY_SOURCE) names the rank whose
// next burst has arrived, that burst is read whole (its other messages kept), and so on until a
// message of the tag comes. tsrProbe sees only pairs whose link exists, so a group that allows it
// links every pair when it is made (connectAll).
#pragma once

#include <ATen/core/Tensor.h>
#include <tessera/tessera.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace tessera_torch {

struct P2POp {
  bool isSend = true;
  int peer = 0;
  int tag = 0;
  at::Tensor tensor;  // contiguous; a CUDA tensor's payload goes on the pair's device comm
};

class P2P {
 public:
  // `comm`: the group's p2p communicator. `deviceComm(peer, device)` gives the 2-rank device
  // communicator of the pair (made on first use); `stream(device)` the stream device payloads
  // run on.
  P2P(tsrComm_t comm, int rank, int nranks, std::function<tsrComm_t(int, int)> deviceComm,
      std::function<void*(int)> stream);

  // Runs the ops of one batch (one op outside a batch): returns when every send is on its way
  // (host: in the peer's slots or received; device: enqueued) and every receive is in place
  // (device: enqueued). Throws with a sentence naming the peer, the tag and the sizes.
  void run(std::vector<P2POp>& ops);
  // Receives into `dst` the first message of `tag` from any other rank (see the file comment);
  // returns its sender. Needs connectAll first.
  int recvAny(const at::Tensor& dst, int tag);
  // Collective over the communicator: one byte each way between every pair, which sets up every
  // pair's link (before any message of the wire format above).
  void connectAll();

 private:
  struct Header {
    int64_t tag;
    uint64_t bytes;
    uint32_t burst;   // messages of the burst (in the first header)
    uint32_t device;  // 1: the payload travels on the pair's device communicator
    uint64_t pad;
  };
  static_assert(sizeof(Header) == 32);
  struct Incoming {  // a message whose header arrived
    Header header;
    int peer = 0;
    at::Tensor dst;  // where its payload goes (a receive's tensor, or a stash buffer)
    bool stashed = false;
  };
  struct Stashed {
    int64_t tag;
    at::Tensor data;   // uint8, the payload's bytes
    uint64_t arrival;  // this rank's count of messages kept so far (the order across peers)
  };
  struct Want {  // a receive not yet matched
    P2POp* op;
    bool done = false;
  };

  // Matches `in` to the earliest open receive of its tag from its peer, else makes it a stash
  // entry (buffer allocated like the receive tensors of that kind).
  void assign(Incoming* in, std::vector<Want>& wants, const at::TensorOptions& hostOptions);
  // Posts the payload receive of `in` (inside an open tessera group).
  void recvPayload(const Incoming& in);
  void sendPayload(const P2POp& op);
  tsrComm_t payloadComm(int peer, bool onDevice, int device, void** stream);

  tsrComm_t comm_;
  int rank_, nranks_;
  std::function<tsrComm_t(int, int)> deviceComm_;
  std::function<void*(int)> stream_;
  std::vector<std::deque<Stashed>> stash_;  // by peer, in arrival order
  uint64_t arrivals_ = 0;
  void keep(int peer, int64_t tag, at::Tensor data) {
    stash_[static_cast<size_t>(peer)].push_back({tag, std::move(data), arrivals_++});
  }
};

}  // namespace tessera_torch
