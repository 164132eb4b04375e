#include "bootstrap/mpi_bootstrap.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kBootstrap;

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return strprintf("MPI error %d", code);
  return std::string(text, static_cast<size_t>(len));
}
}  // namespace

Result MpiBootstrap::create(MPI_Comm comm, const BootstrapOptions& options,
                            std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "mpi bootstrap: null output pointer");
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return TSR_FAIL(tsrInvalidUsage, "mpi bootstrap: MPI is %s",
                    finalized ? "already finalized" : "not initialized (call MPI_Init first)");
  if (comm == MPI_COMM_NULL)
    return TSR_FAIL(tsrInvalidArgument, "mpi bootstrap: the communicator is MPI_COMM_NULL");
  double timeout = 0;
  TSR_CHECK(resolveBootstrapTimeout(options, &timeout));
  Deadline deadline = Deadline::after(timeout);
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);

  // MPI writes the new communicator when the request completes, which may be after we gave up:
  // keep both on the heap, and leave them there (leaked on purpose) on a timeout.
  struct PendingDup {
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  auto pending = std::make_unique<PendingDup>();
  int rc = MPI_Comm_idup(comm, &pending->dup, &pending->request);
  Backoff backoff;
  for (int done = 0; rc == MPI_SUCCESS && !done;) {
    rc = MPI_Test(&pending->request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (deadline.expired()) {
      pending.release();
      return TSR_FAIL(tsrTimeout,
                      "mpi bootstrap, rank %d of %d: duplicating the MPI "
                      "communicator timed out after %g s: not every rank called create",
                      rank, size, timeout);
    }
    backoff.pause();
  }
  MPI_Comm dup = pending->dup;
  if (rc != MPI_SUCCESS)
    return TSR_FAIL(tsrSystemError, "mpi bootstrap, rank %d of %d: MPI_Comm_idup failed: %s", rank,
                    size, mpiErrorText(rc).c_str());
  // Errors come back to us as codes instead of ending the job.
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  out->reset(new MpiBootstrap(dup, rank, size, timeout, tagUpperBound(options)));
  return tsrSuccess;
}

int MpiBootstrap::tagUpperBound(const BootstrapOptions& options) {
  // MPI_TAG_UB is an attribute of MPI_COMM_WORLD: a communicator made from another may not
  // carry it (an Open MPI 4.1 split child does not), and reading it there gave MPI's minimum. The
  // standard's floor, 32767, is what any MPI allows.
  constexpr int kMpiMinimum = 32767;
  int* attr = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &found);
  int ub = found && attr != nullptr ? std::max(*attr, kMpiMinimum) : kMpiMinimum;
  if (options.mpiTagUpperBound > 0)
    ub = std::max(std::min(ub, options.mpiTagUpperBound), kMpiMinimum);
  return ub;
}

MpiBootstrap::MpiBootstrap(MPI_Comm comm, int rank, int nranks, double timeout, int tagUpperBound)
    : Bootstrap(rank, nranks, timeout), comm_(comm), tagUpperBound_(tagUpperBound) {
  // The largest all-ones mask the MPI's tags can hold: tessera's tags are folded onto it.
  int64_t mask = 1;
  while (mask * 2 + 1 <= tagUpperBound_) mask = mask * 2 + 1;
  tagMask_ = static_cast<int>(mask);
}

MpiBootstrap::~MpiBootstrap() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    // Give buffered sends a moment to be received; ones that never are stay behind (leaked).
    Deadline grace = Deadline::after(std::min(timeoutSeconds(), 5.0));
    Backoff backoff;
    while (!sends_.empty() && !grace.expired()) {
      progressSends();
      backoff.pause();
    }
    for (auto& op : sends_) MPI_Request_free(&op->request);
    if (sends_.empty() && abandoned_.empty()) MPI_Comm_free(&comm_);
  }
  // MPI may still read or write these buffers.
  for (auto& op : sends_) op.release();
  for (auto& op : abandoned_) op.release();
}

Result MpiBootstrap::mpiFailed(int code, const std::string& what) {
  return fail(tsrSystemError, "%s: MPI failed: %s", what.c_str(), mpiErrorText(code).c_str());
}

Result MpiBootstrap::checkCount(size_t bytes, const char* what) {
  if (bytes > static_cast<size_t>(INT_MAX))
    return fail(tsrInvalidArgument, "%s of %zu bytes: MPI counts stop at %d bytes", what, bytes,
                INT_MAX);
  return tsrSuccess;
}

void MpiBootstrap::progressSends() {
  std::erase_if(sends_, [&](std::unique_ptr<Op>& op) {
    int done = 0;
    int rc = MPI_Test(&op->request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      TSR_WARN("mpi bootstrap, rank %d: a buffered send failed: %s", rank(),
               mpiErrorText(rc).c_str());
    return done || rc != MPI_SUCCESS;
  });
}

Result MpiBootstrap::wait(std::unique_ptr<Op>& op, const Deadline& deadline,
                          const std::string& what, const char* timeoutDetail) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(&op->request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpiFailed(rc, what);
    if (done) return tsrSuccess;
    progressSends();
    const bool stop = aborted() || deadline.expired();
    if (stop) {
      abandoned_.push_back(std::move(op));
      if (aborted()) return interrupted(what.c_str());
      return fail(tsrTimeout, "%s timed out after %s: %s", what.c_str(),
                  secondsText(deadline.seconds()).c_str(), timeoutDetail);
    }
    backoff.pause();
  }
}

Result MpiBootstrap::doSend(int peer, int tag, const void* data, size_t bytes,
                            const Deadline& deadline) {
  TSR_CHECK(checkCount(bytes + kEnvelopeBytes, "send"));
  auto op = std::make_unique<Op>();
  op->buffer.resize(kEnvelopeBytes + bytes);
  const int32_t envelope = tag;
  std::memcpy(op->buffer.data(), &envelope, kEnvelopeBytes);
  if (bytes > 0) std::memcpy(op->buffer.data() + kEnvelopeBytes, data, bytes);
  const int mpiTag = tag & tagMask_;
  int rc = MPI_Isend(op->buffer.data(), static_cast<int>(op->buffer.size()), MPI_BYTE, peer, mpiTag,
                     comm_, &op->request);
  if (rc != MPI_SUCCESS)
    return mpiFailed(rc, strprintf("send of %zu bytes to rank %d with tag %d", bytes, peer, tag));
  sends_.push_back(std::move(op));
  progressSends();
  return tsrSuccess;
}

Result MpiBootstrap::receiveOne(int peer, int mpiTag, const std::string& what,
                                const Deadline& deadline, int* tag, std::vector<uint8_t>* message) {
  // Probe first: nothing lands in the caller's buffer before its size is known.
  MPI_Message handle = MPI_MESSAGE_NULL;
  MPI_Status status;
  Backoff backoff;
  for (int found = 0; !found;) {
    int rc = MPI_Improbe(peer, mpiTag, comm_, &found, &handle, &status);
    if (rc != MPI_SUCCESS) return mpiFailed(rc, what);
    if (found) break;
    progressSends();
    if (aborted()) return interrupted(what.c_str());
    if (deadline.expired())
      return fail(tsrTimeout, "%s timed out after %s: rank %d sent nothing", what.c_str(),
                  secondsText(deadline.seconds()).c_str(), peer);
    backoff.pause();
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  auto op = std::make_unique<Op>();
  op->buffer.resize(static_cast<size_t>(count));
  int rc = MPI_Imrecv(op->buffer.data(), count, MPI_BYTE, &handle, &op->request);
  if (rc != MPI_SUCCESS) return mpiFailed(rc, what);
  TSR_CHECK(wait(op, deadline, what, "the message did not finish arriving"));
  int32_t envelope = -1;
  if (op->buffer.size() >= kEnvelopeBytes)
    std::memcpy(&envelope, op->buffer.data(), kEnvelopeBytes);
  if (envelope < 0 || (envelope & tagMask_) != mpiTag)
    return fail(tsrInternalError,
                "%s: rank %d sent a message of %d bytes on MPI tag %d without a valid envelope "
                "(is something else sending on tessera's MPI communicator?)",
                what.c_str(), peer, count, mpiTag);
  *tag = envelope;
  message->assign(op->buffer.begin() + kEnvelopeBytes, op->buffer.end());
  return tsrSuccess;
}

Result MpiBootstrap::doRecv(int peer, int tag, void* data, size_t bytes, const Deadline& deadline) {
  TSR_CHECK(checkCount(bytes + kEnvelopeBytes, "recv"));
  std::string what = strprintf("recv from rank %d with tag %d", peer, tag);
  std::vector<uint8_t> message;
  // Tags folded onto the same MPI tag share its order: a message for another tag that came
  // first waits in early_ for its own recv, which looks there before asking MPI.
  auto early = early_.find({peer, tag});
  if (early != early_.end()) {
    message = std::move(early->second.front());
    early->second.pop_front();
    if (early->second.empty()) early_.erase(early);
  } else {
    for (;;) {
      int got = -1;
      TSR_CHECK(receiveOne(peer, tag & tagMask_, what, deadline, &got, &message));
      if (got == tag) break;
      early_[{peer, got}].push_back(std::move(message));
    }
  }
  if (message.size() != bytes)
    return fail(tsrInvalidUsage,
                "%s: expected %zu bytes from rank %d but its message has %zu bytes", what.c_str(),
                bytes, peer, message.size());
  if (bytes > 0) std::memcpy(data, message.data(), bytes);
  return tsrSuccess;
}

Result MpiBootstrap::doAllGather(void* data, size_t bytesPerRank, const Deadline& deadline) {
  TSR_CHECK(checkCount(bytesPerRank, "allGather"));
  std::string what = strprintf("allGather of %zu bytes per rank", bytesPerRank);
  const size_t total = bytesPerRank * static_cast<size_t>(nranks());
  auto op = std::make_unique<Op>();
  op->buffer.resize(total);
  const size_t mine = static_cast<size_t>(rank()) * bytesPerRank;
  if (bytesPerRank > 0)
    std::memcpy(op->buffer.data() + mine, static_cast<uint8_t*>(data) + mine, bytesPerRank);
  int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->buffer.data(),
                          static_cast<int>(bytesPerRank), MPI_BYTE, comm_, &op->request);
  if (rc != MPI_SUCCESS) return mpiFailed(rc, what);
  TSR_CHECK(wait(op, deadline, what,
                 "not every rank of the MPI communicator called it (MPI does not say which)"));
  if (total > 0) std::memcpy(data, op->buffer.data(), total);
  return tsrSuccess;
}

Result MpiBootstrap::doBarrier(const Deadline& deadline) {
  auto op = std::make_unique<Op>();
  int rc = MPI_Ibarrier(comm_, &op->request);
  if (rc != MPI_SUCCESS) return mpiFailed(rc, "barrier");
  return wait(op, deadline, "barrier",
              "not every rank of the MPI communicator called it (MPI does not say which)");
}

Result MpiBootstrap::doBroadcast(void* data, size_t bytes, int root, const Deadline& deadline) {
  TSR_CHECK(checkCount(bytes, "broadcast"));
  std::string what = strprintf("broadcast of %zu bytes from root %d", bytes, root);
  auto op = std::make_unique<Op>();
  op->buffer.resize(bytes);
  if (rank() == root && bytes > 0) std::memcpy(op->buffer.data(), data, bytes);
  int rc =
      MPI_Ibcast(op->buffer.data(), static_cast<int>(bytes), MPI_BYTE, root, comm_, &op->request);
  if (rc != MPI_SUCCESS) return mpiFailed(rc, what);
  std::string detail = strprintf("root %d or a rank on the way did not call it", root);
  TSR_CHECK(wait(op, deadline, what, detail.c_str()));
  if (rank() != root && bytes > 0) std::memcpy(data, op->buffer.data(), bytes);
  return tsrSuccess;
}

Result MpiBootstrap::doSplit(int color, int key, std::unique_ptr<Bootstrap>* child) {
  // MPI_Comm_split blocks; first make sure (with a deadline) that every rank has come.
  int mine[2] = {color, key};
  std::vector<int> all(2 * static_cast<size_t>(nranks()));
  std::memcpy(all.data() + 2 * rank(), mine, sizeof(mine));
  if (Result r = allGather(all.data(), sizeof(mine)); r != tsrSuccess)
    return addContext(r, "split (checking that every rank arrived)");
  MPI_Comm split = MPI_COMM_NULL;
  int rc = MPI_Comm_split(comm_, color == TSR_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &split);
  if (rc != MPI_SUCCESS) return mpiFailed(rc, "split");
  if (split == MPI_COMM_NULL) return tsrSuccess;
  BootstrapOptions options = childOptions();
  options.mpiTagUpperBound = tagUpperBound_;
  Result r = create(split, options, child);
  MPI_Comm_free(&split);
  return r;
}

Result MpiBootstrap::doShrink(const std::vector<int>& survivors,
                              std::unique_ptr<Bootstrap>* child) {
  // MPI_Comm_create_group is collective over the survivors only, but it blocks: first make sure
  // (with a deadline, by messages that never involve an excluded rank) that every survivor came.
  TSR_CHECK(shrinkArrive(survivors));
  const int leader = survivors.front();
  const int32_t childSize = static_cast<int32_t>(survivors.size());
  if (rank() == leader) {
    for (int r : survivors)
      if (r != leader) TSR_CHECK(send(r, kShrinkTag, &childSize, sizeof(childSize)));
  } else {
    int32_t go = 0;
    if (Result got = recv(leader, kShrinkTag, &go, sizeof(go)); got != tsrSuccess)
      return addContext(got, "shrink (waiting for rank %d, the lowest survivor)", leader);
  }
  MPI_Group all = MPI_GROUP_NULL, kept = MPI_GROUP_NULL;
  MPI_Comm_group(comm_, &all);
  MPI_Group_incl(all, childSize, survivors.data(), &kept);
  MPI_Comm shrunk = MPI_COMM_NULL;
  int rc = MPI_Comm_create_group(comm_, kept, kShrinkTag & tagMask_, &shrunk);
  MPI_Group_free(&kept);
  MPI_Group_free(&all);
  if (rc != MPI_SUCCESS) return mpiFailed(rc, "shrink (MPI_Comm_create_group)");
  BootstrapOptions options = childOptions();
  options.mpiTagUpperBound = tagUpperBound_;
  Result r = create(shrunk, options, child);
  MPI_Comm_free(&shrunk);
  return r;
}

bool MpiBootstrap::usableFromAnotherThread() const {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level >= MPI_THREAD_MULTIPLE;
}

}  // namespace tessera
