// tsrAlltoAllv: an uneven all-to-all as one group of sends and receives. Every argument is checked
// before anything is queued (DESIGN.md, "One call, end to end"); the sends and receives then meet
// their peers' by the point-to-point rule (the k-th send to p meets p's k-th receive from this
// rank), so a size that differs between a sender and its receiver fails on both with the engine's
// sentence. A block of 0 elements is neither sent nor received (as NCCL's grouped send/recv skip
// them): a rank that expects elements its peer does not send waits until the deadline, and the
// timeout names the peer.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm/api_guard.hpp"
#include "comm/comm_impl.hpp"
#include "comm/group.hpp"
#include "core/datatype.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

struct Block {
  uintptr_t begin = 0;
  uintptr_t end = 0;  // one past the last byte
  int peer = 0;
};

// The byte range of block p (count elements at displacement displ), or a sentence when it does not
// fit the address space.
Result blockRange(const char* which, const void* base, size_t count, size_t displ, size_t unit,
                  int peer, Block* out) {
  constexpr auto kMax = static_cast<size_t>(PTRDIFF_MAX);
  if (count > kMax / unit || displ > kMax / unit || count * unit > kMax - displ * unit)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrAlltoAllv: %s block of rank %d (%zu elements at displacement %zu, %zu "
                    "bytes each) is more than %zu bytes from the buffer's start (PTRDIFF_MAX)",
                    which, peer, count, displ, unit, kMax);
  const auto start = reinterpret_cast<uintptr_t>(base) + displ * unit;
  if (start < reinterpret_cast<uintptr_t>(base) || start + count * unit < start)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrAlltoAllv: %s block of rank %d wraps around the address space", which,
                    peer);
  *out = {start, start + count * unit, peer};
  return tsrSuccess;
}

Result collectBlocks(const char* which, const void* base, const size_t* counts,
                     const size_t* displs, size_t unit, int n, std::vector<Block>* out) {
  if (counts == nullptr || displs == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "tsrAlltoAllv: %scounts or %sdispls is NULL", which,
                    which[0] == 's' ? "s" : "r");
  for (int p = 0; p < n; ++p) {
    if (counts[p] == 0) continue;
    if (base == nullptr)
      return TSR_FAIL(tsrInvalidArgument, "tsrAlltoAllv: %sbuff is NULL but %scounts[%d] = %zu",
                      which, which, p, counts[p]);
    Block b;
    TSR_CHECK(blockRange(which, base, counts[p], displs[p], unit, p, &b));
    out->push_back(b);
  }
  std::sort(out->begin(), out->end(),
            [](const Block& a, const Block& b) { return a.begin < b.begin; });
  return tsrSuccess;
}

// Every argument, before anything is queued: nothing is sent or written when one is wrong.
Result checkAlltoAllv(CommImpl& comm, const void* sendbuff, const size_t* sendcounts,
                      const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                      const size_t* rdispls, tsrDataType_t dtype) {
  TSR_CHECK(comm.checkReady("tsrAlltoAllv"));
  TSR_CHECK(dtypeCheck(dtype, "tsrAlltoAllv"));
  const int n = comm.nranks();
  const size_t unit = dtypeSize(dtype);
  std::vector<Block> sends, recvs;
  TSR_CHECK(collectBlocks("send", sendbuff, sendcounts, sdispls, unit, n, &sends));
  TSR_CHECK(collectBlocks("recv", recvbuff, recvcounts, rdispls, unit, n, &recvs));
  // Two senders writing the same bytes would leave one of them (which, depends on timing).
  for (size_t i = 1; i < recvs.size(); ++i)
    if (recvs[i].begin < recvs[i - 1].end)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrAlltoAllv: the receive blocks of ranks %d and %d overlap ([%p, %p) and "
                      "[%p, %p))",
                      recvs[i - 1].peer, recvs[i].peer, reinterpret_cast<void*>(recvs[i - 1].begin),
                      reinterpret_cast<void*>(recvs[i - 1].end),
                      reinterpret_cast<void*>(recvs[i].begin),
                      reinterpret_cast<void*>(recvs[i].end));
  // A receive into bytes still to be sent would send what arrived instead: no in-place form.
  for (const Block& s : sends) {
    auto it = std::upper_bound(recvs.begin(), recvs.end(), s.begin,
                               [](uintptr_t x, const Block& b) { return x < b.begin; });
    // Candidates: the receive block that starts at or before s.begin, and the one after it.
    for (auto c : {it == recvs.begin() ? recvs.end() : it - 1, it}) {
      if (c == recvs.end() || !(c->begin < s.end && s.begin < c->end)) continue;
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrAlltoAllv: the send block for rank %d [%p, %p) overlaps the receive "
                      "block from rank %d [%p, %p); alltoallv has no in-place form",
                      s.peer, reinterpret_cast<void*>(s.begin), reinterpret_cast<void*>(s.end),
                      c->peer, reinterpret_cast<void*>(c->begin), reinterpret_cast<void*>(c->end));
    }
  }
  return tsrSuccess;
}

}  // namespace

tsrResult_t Communicator::alltoAllv(const void* sendbuff, const size_t* sendcounts,
                                    const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                                    const size_t* rdispls, tsrDataType_t datatype,
                                    tsrStream_t stream) {
  ScopedRank scoped(impl_->rank());
  Result r = guarded("tsrAlltoAllv", [&]() -> Result {
    TSR_CHECK(checkAlltoAllv(*impl_, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                             datatype));
    const size_t unit = dtypeSize(datatype);
    const int n = impl_->nranks(), me = impl_->rank();
    TSR_CHECK(groupStart());
    // The group is closed whatever happens: a failed call is remembered by the group (and by an
    // outer one the caller opened), so its end fails too and starts nothing.
    Result first = tsrSuccess;
    for (int i = 0; i < n && first == tsrSuccess; ++i) {
      // Peers in a rotated order (me, me+1, ...): the first pieces of the ranks go to different
      // peers instead of all to rank 0.
      const int p = (me + i) % n;
      if (sendcounts[p] > 0)
        first = send(static_cast<const char*>(sendbuff) + sdispls[p] * unit, sendcounts[p],
                     datatype, p, stream);
      if (first == tsrSuccess && recvcounts[p] > 0)
        first = recv(static_cast<char*>(recvbuff) + rdispls[p] * unit, recvcounts[p], datatype, p,
                     stream);
    }
    std::string why = first != tsrSuccess ? lastErrorMessage() : "";
    Result end = groupEnd();
    if (first != tsrSuccess) return TSR_FAIL(first, "tsrAlltoAllv: %s", why.c_str());
    return end;
  });
  return r == tsrSuccess ? r : noteCallError(r);
}

}  // namespace tessera
