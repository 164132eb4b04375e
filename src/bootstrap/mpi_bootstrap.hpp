// MPI bootstrap: wraps a duplicate of an MPI communicator. Every operation is non-blocking MPI
// polled with MPI_Test against the deadline, so a rank that never calls in makes the others
// fail with tsrTimeout instead of hanging. Built only where MPI was found (TESSERA_HAVE_MPI).
#pragma once

// The C API only: Open MPI's and MPICH's C++ bindings would need their own library.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace tessera {

class MpiBootstrap final : public Bootstrap {
 public:
  // Every rank of `comm` calls it. MPI must be initialized; `comm` itself is not used after.
  static Result create(MPI_Comm comm, const BootstrapOptions& options,
                       std::unique_ptr<Bootstrap>* out);
  ~MpiBootstrap() override;
  const char* kind() const override { return "mpi"; }
  bool usableFromAnotherThread() const override;

 protected:
  Result doAllGather(void* data, size_t bytesPerRank, const Deadline& deadline) override;
  Result doSend(int peer, int tag, const void* data, size_t bytes,
                const Deadline& deadline) override;
  Result doRecv(int peer, int tag, void* data, size_t bytes, const Deadline& deadline) override;
  Result doBarrier(const Deadline& deadline) override;
  Result doBroadcast(void* data, size_t bytes, int root, const Deadline& deadline) override;
  void doAbort() override {}  // the polling loops watch aborted()
  // MPI_Comm_split, once a non-blocking allGather has shown that every rank arrived.
  Result doSplit(int color, int key, std::unique_ptr<Bootstrap>* child) override;
  // MPI_Comm_create_group over the survivors, once messages between them (with a deadline)
  // have shown that every survivor arrived.
  Result doShrink(const std::vector<int>& survivors, std::unique_ptr<Bootstrap>* child) override;

 private:
  // A request and the buffer MPI reads or writes until it completes.
  struct Op {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<uint8_t> buffer;
  };

  // Every point-to-point message starts with its full tessera tag (int32); the MPI tag is that
  // tag folded onto tagMask_, so any tag >= 0 works on an MPI whose MPI_TAG_UB is 32767.
  static constexpr size_t kEnvelopeBytes = sizeof(int32_t);

  MpiBootstrap(MPI_Comm comm, int rank, int nranks, double timeout, int tagUpperBound);
  // MPI_TAG_UB of MPI_COMM_WORLD, lowered to options.mpiTagUpperBound where set.
  static int tagUpperBound(const BootstrapOptions& options);
  // Receives the next message from `peer` on `mpiTag`, whatever its tessera tag (in *tag).
  Result receiveOne(int peer, int mpiTag, const std::string& what, const Deadline& deadline,
                    int* tag, std::vector<uint8_t>* message);
  // Polls `op` until it completes. On a timeout or an abort the op is kept (MPI may still touch
  // its buffer) and the error names `what`.
  Result wait(std::unique_ptr<Op>& op, const Deadline& deadline, const std::string& what,
              const char* timeoutDetail);
  Result mpiFailed(int code, const std::string& what);
  Result checkCount(size_t bytes, const char* what);
  void progressSends();

  MPI_Comm comm_;
  int tagUpperBound_;
  int tagMask_ = 0;
  // Messages that arrived for a (peer, tag) before anyone received them (they share an MPI
  // tag with the one being received), oldest first.
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> early_;
  std::vector<std::unique_ptr<Op>> sends_;      // buffered sends not yet complete
  std::vector<std::unique_ptr<Op>> abandoned_;  // timed out or interrupted
};

}  // namespace tessera
