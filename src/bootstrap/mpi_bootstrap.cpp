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
  int* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(dup, MPI_TAG_UB, &ub, &found);
  out->reset(new MpiBootstrap(dup, rank, size, timeout, found && ub ? *ub : 32767));
  return tsrSuccess;
}

MpiBootstrap::MpiBootstrap(MPI_Comm comm, int rank, int nranks, double timeout, int tagUpperBound)
    : Bootstrap(rank, nranks, timeout), comm_(comm), tagUpperBound_(tagUpperBound) {}

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
  TSR_CHECK(checkCount(bytes, "send"));
  if (tag > tagUpperBound_)
    return fail(tsrInvalidArgument, "send with tag %d: this MPI allows tags up to %d", tag,
                tagUpperBound_);
  auto op = std::make_unique<Op>();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  op->buffer.assign(p, p + bytes);
  int rc = MPI_Isend(op->buffer.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_,
                     &op->request);
  if (rc != MPI_SUCCESS)
    return mpiFailed(rc, strprintf("send of %zu bytes to rank %d with tag %d", bytes, peer, tag));
  sends_.push_back(std::move(op));
  progressSends();
  return tsrSuccess;
}

Result MpiBootstrap::doRecv(int peer, int tag, void* data, size_t bytes, const Deadline& deadline) {
  TSR_CHECK(checkCount(bytes, "recv"));
  std::string what = strprintf("recv from rank %d with tag %d", peer, tag);
  if (tag > tagUpperBound_)
    return fail(tsrInvalidArgument, "%s: this MPI allows tags up to %d", what.c_str(),
                tagUpperBound_);
  // Probe first: the size of the message is checked before it lands in any buffer.
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  Backoff backoff;
  for (int found = 0; !found;) {
    int rc = MPI_Improbe(peer, tag, comm_, &found, &message, &status);
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
  int rc = MPI_Imrecv(op->buffer.data(), count, MPI_BYTE, &message, &op->request);
  if (rc != MPI_SUCCESS) return mpiFailed(rc, what);
  TSR_CHECK(wait(op, deadline, what, "the message did not finish arriving"));
  if (static_cast<size_t>(count) != bytes)
    return fail(tsrInvalidUsage, "%s: expected %zu bytes from rank %d but its message has %d bytes",
                what.c_str(), bytes, peer, count);
  if (bytes > 0) std::memcpy(data, op->buffer.data(), bytes);
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
  Result r = create(split, childOptions(), child);
  MPI_Comm_free(&split);
  return r;
}

bool MpiBootstrap::usableFromAnotherThread() const {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level >= MPI_THREAD_MULTIPLE;
}

}  // namespace tessera
