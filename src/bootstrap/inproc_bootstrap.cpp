// Thread ranks share one State under a mutex. A collective is identified by its position in the
// sequence of collectives every rank calls in the same order, so consecutive collectives never
// share a buffer: the n-th one lives until all ranks have left it. Messages wait in mailboxes
// keyed by (source, destination, tag); send never blocks.
#include "bootstrap/inproc_bootstrap.hpp"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;
}  // namespace

struct InprocGroup::State {
  struct Collective {
    int op = 0;
    size_t bytes = 0;
    int root = 0;
    std::vector<uint8_t> data;
    std::vector<bool> arrived;
    int arrivedCount = 0;
    int departed = 0;
    std::string mismatch;  // a rank called another collective at this position
  };

  std::mutex mu;
  std::condition_variable cv;
  int nranks = 0;
  double timeoutSeconds = 0;
  std::vector<bool> joined;
  std::vector<bool> gone;  // aborted or destroyed
  std::map<uint64_t, Collective> collectives;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<uint8_t>>> mail;
  // Children created by splits of this group stay alive as long as it does, so the address a
  // leader hands its members stays valid whatever the leader does next.
  std::vector<std::shared_ptr<InprocGroup>> children;
};

InprocGroup::InprocGroup(std::unique_ptr<State> state) : state_(std::move(state)) {}
InprocGroup::~InprocGroup() = default;
int InprocGroup::nranks() const { return state_->nranks; }

Result InprocBootstrap::createGroup(int nranks, const BootstrapOptions& options,
                                    std::shared_ptr<InprocGroup>* group) {
  if (group == nullptr) return TSR_FAIL(tsrInvalidArgument, "inproc bootstrap: null group pointer");
  if (nranks < 1)
    return TSR_FAIL(tsrInvalidArgument, "inproc bootstrap: a group of %d ranks (need >= 1)",
                    nranks);
  auto state = std::make_unique<InprocGroup::State>();
  TSR_CHECK(resolveBootstrapTimeout(options, &state->timeoutSeconds));
  state->nranks = nranks;
  state->joined.assign(static_cast<size_t>(nranks), false);
  state->gone.assign(static_cast<size_t>(nranks), false);
  *group = std::shared_ptr<InprocGroup>(new InprocGroup(std::move(state)));
  return tsrSuccess;
}

Result InprocGroup::join(int rank, std::unique_ptr<Bootstrap>* out) {
  State& s = *state_;
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "inproc bootstrap: null output pointer");
  if (rank < 0 || rank >= s.nranks)
    return TSR_FAIL(tsrInvalidArgument, "inproc bootstrap: rank %d is out of range (%d ranks)",
                    rank, s.nranks);
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.joined[static_cast<size_t>(rank)])
    return TSR_FAIL(tsrInvalidUsage, "inproc bootstrap: rank %d joined its group twice", rank);
  s.joined[static_cast<size_t>(rank)] = true;
  out->reset(new InprocBootstrap(shared_from_this(), rank, s.nranks, s.timeoutSeconds));
  return tsrSuccess;
}

InprocBootstrap::InprocBootstrap(std::shared_ptr<InprocGroup> group, int rank, int nranks,
                                 double timeout)
    : Bootstrap(rank, nranks, timeout), group_(std::move(group)) {}

InprocBootstrap::~InprocBootstrap() {
  InprocGroup::State& s = *group_->state_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.gone[static_cast<size_t>(rank())] = true;
  s.cv.notify_all();
}

void InprocBootstrap::doAbort() {
  InprocGroup::State& s = *group_->state_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.gone[static_cast<size_t>(rank())] = true;
  s.cv.notify_all();
}

namespace {
const char* opName(int op) {
  static const char* const kNames[] = {"allGather", "barrier", "broadcast"};
  return kNames[op];
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}
}  // namespace

Result InprocBootstrap::collective(Op opEnum, void* data, size_t bytes, int root,
                                   const Deadline& deadline) {
  InprocGroup::State& s = *group_->state_;
  const int op = static_cast<int>(opEnum);
  const size_t me = static_cast<size_t>(rank());
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t seq = sequence_++;
  auto [it, created] = s.collectives.try_emplace(seq);
  InprocGroup::State::Collective& c = it->second;
  auto depart = [&] {
    if (++c.departed == s.nranks) s.collectives.erase(seq);
  };
  if (created) {
    c.op = op;
    c.bytes = bytes;
    c.root = root;
    c.data.resize(opEnum == Op::kAllGather ? bytes * static_cast<size_t>(s.nranks) : bytes);
    c.arrived.assign(static_cast<size_t>(s.nranks), false);
  } else if (c.op != op || c.bytes != bytes || c.root != root) {
    c.mismatch = strprintf(
        "collective #%llu: rank %d called %s (%zu bytes, root %d) where another rank called %s "
        "(%zu bytes, root %d)",
        static_cast<unsigned long long>(seq), rank(), opName(op), bytes, root, opName(c.op),
        c.bytes, c.root);
    std::string why = c.mismatch;
    depart();
    s.cv.notify_all();
    return fail(tsrInvalidUsage, "%s", why.c_str());
  }

  if (opEnum == Op::kAllGather && bytes > 0)
    std::memcpy(c.data.data() + me * bytes, static_cast<uint8_t*>(data) + me * bytes, bytes);
  else if (opEnum == Op::kBroadcast && rank() == root && bytes > 0)
    std::memcpy(c.data.data(), data, bytes);
  c.arrived[me] = true;
  ++c.arrivedCount;
  s.cv.notify_all();

  // A broadcast needs only its root; the others need everyone.
  auto missing = [&] {
    std::vector<int> m;
    for (int r = 0; r < s.nranks; ++r)
      if (!c.arrived[static_cast<size_t>(r)] && (opEnum != Op::kBroadcast || r == root))
        m.push_back(r);
    return m;
  };
  for (;;) {
    std::vector<int> waitingFor = missing();
    if (waitingFor.empty()) break;
    Result failure = tsrSuccess;
    if (!c.mismatch.empty()) {
      failure = fail(tsrInvalidUsage, "%s failed: %s", opName(op), c.mismatch.c_str());
    } else if (aborted()) {
      failure = interrupted(opName(op));
    } else {
      for (int r : waitingFor)
        if (s.gone[static_cast<size_t>(r)]) {
          failure = fail(tsrRemoteError,
                         "%s: rank %d left the group (aborted or destroyed) "
                         "before it reached this %s",
                         opName(op), r, opName(op));
          break;
        }
    }
    if (failure == tsrSuccess && s.cv.wait_until(lock, deadline.at()) == std::cv_status::timeout &&
        !missing().empty()) {
      std::vector<int> never;
      for (int r : missing())
        if (!s.joined[static_cast<size_t>(r)]) never.push_back(r);
      failure = fail(tsrTimeout,
                     "%s (collective #%llu) timed out after %s: rank(s) %s did not "
                     "arrive%s%s",
                     opName(op), static_cast<unsigned long long>(seq),
                     secondsText(deadline.seconds()).c_str(), rankList(missing()).c_str(),
                     never.empty() ? "" : "; never joined the group: ", rankList(never).c_str());
    }
    if (failure != tsrSuccess) {
      depart();
      return failure;
    }
  }

  if (opEnum == Op::kAllGather && bytes > 0)
    std::memcpy(data, c.data.data(), c.data.size());
  else if (opEnum == Op::kBroadcast && rank() != root && bytes > 0)
    std::memcpy(data, c.data.data(), bytes);
  depart();
  return tsrSuccess;
}

Result InprocBootstrap::doAllGather(void* data, size_t bytesPerRank, const Deadline& deadline) {
  return collective(Op::kAllGather, data, bytesPerRank, 0, deadline);
}

Result InprocBootstrap::doBarrier(const Deadline& deadline) {
  return collective(Op::kBarrier, nullptr, 0, 0, deadline);
}

Result InprocBootstrap::doBroadcast(void* data, size_t bytes, int root, const Deadline& deadline) {
  return collective(Op::kBroadcast, data, bytes, root, deadline);
}

Result InprocBootstrap::doSend(int peer, int tag, const void* data, size_t bytes,
                               const Deadline& deadline) {
  InprocGroup::State& s = *group_->state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.gone[static_cast<size_t>(peer)])
    return fail(tsrRemoteError,
                "send to rank %d (tag %d): that rank left the group (aborted or "
                "destroyed)",
                peer, tag);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  s.mail[{rank(), peer, tag}].emplace_back(p, p + bytes);
  s.cv.notify_all();
  return tsrSuccess;
}

Result InprocBootstrap::doRecv(int peer, int tag, void* data, size_t bytes,
                               const Deadline& deadline) {
  InprocGroup::State& s = *group_->state_;
  std::unique_lock<std::mutex> lock(s.mu);
  auto& box = s.mail[{peer, rank(), tag}];
  while (box.empty()) {
    if (aborted()) return interrupted("recv");
    if (s.gone[static_cast<size_t>(peer)])
      return fail(tsrRemoteError,
                  "recv from rank %d (tag %d): that rank left the group (aborted "
                  "or destroyed) without sending the message",
                  peer, tag);
    if (s.cv.wait_until(lock, deadline.at()) == std::cv_status::timeout && box.empty())
      return fail(tsrTimeout, "recv from rank %d (tag %d) timed out after %s%s", peer, tag,
                  secondsText(deadline.seconds()).c_str(),
                  s.joined[static_cast<size_t>(peer)] ? "" : " (that rank never joined the group)");
  }
  std::vector<uint8_t> msg = std::move(box.front());
  box.pop_front();
  if (msg.size() != bytes)
    return fail(tsrInvalidUsage,
                "recv from rank %d (tag %d) expects %zu bytes but the message "
                "has %zu bytes",
                peer, tag, bytes, msg.size());
  if (bytes > 0) std::memcpy(data, msg.data(), bytes);
  return tsrSuccess;
}

Result InprocBootstrap::splitPrepare(int childSize, uint8_t payload[kSplitPayloadBytes]) {
  std::shared_ptr<InprocGroup> child;
  TSR_CHECK(createGroup(childSize, childOptions(), &child));
  InprocGroup* address = child.get();
  {
    InprocGroup::State& s = *group_->state_;
    std::lock_guard<std::mutex> lock(s.mu);
    s.children.push_back(std::move(child));
  }
  std::memcpy(payload, &address, sizeof(address));
  return tsrSuccess;
}

Result InprocBootstrap::splitJoin(const uint8_t payload[kSplitPayloadBytes], int childRank,
                                  int childSize, std::unique_ptr<Bootstrap>* child) {
  InprocGroup* address = nullptr;
  std::memcpy(&address, payload, sizeof(address));
  if (address == nullptr || address->nranks() != childSize)
    return fail(tsrInternalError, "split: the child group handed over is invalid");
  return address->shared_from_this()->join(childRank, child);
}

}  // namespace tessera
