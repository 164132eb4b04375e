// One random call of the cross-check (test_crosscheck_mpi.cpp): how it is drawn
// (crosscheck_coll.cpp), and how it runs on a tessera communicator and on the MPI communicator of
// the same ranks, compared (crosscheck_run.cpp).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpi/crosscheck_types.hpp"
#include "tessera/tessera.h"

namespace tessera::test::crosscheck {

enum class Coll {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kAllToAllv,
  kSendRecv,
  kNumColls
};
const char* collName(Coll c);
bool reduces(Coll c);
bool hasInPlace(Coll c);

// Everything one group's ranks need to run the same call; drawn alike on every rank.
struct Call {
  Coll coll = Coll::kAllReduce;
  const TypeInfo* type = nullptr;
  OpKind op = OpKind::kSum;
  int nranks = 1;
  // allreduce/broadcast/reduce: elements; reducescatter/allgather/alltoall: elements per rank's
  // block; alltoallv: the largest block; sendrecv: rank p sends count + p % 3 elements.
  size_t count = 0;
  bool inPlace = false;
  bool grouped = false;     // inside tsrGroupStart/End
  bool nullOthers = false;  // broadcast's sendbuff / reduce's recvbuff NULL off the root
  bool zeroCopy = false;    // buffers from tsrMemAlloc, registered with the communicator
  int root = 0;
  int shift = 0;                 // sendrecv: rank r sends to r + shift
  size_t offIn = 0, offOut = 0;  // elements before the buffers (alignment)
  uint64_t scalar = 0;           // premulsum, bits of the type
  uint64_t dataSeed = 0;
  // alltoallv, indexed [p * nranks + q]: elements p sends to q, where p's send buffer holds them
  // and where q's receive buffer takes them; and each rank's buffer extents.
  std::vector<size_t> a2aCount, a2aSendDispl, a2aRecvDispl, a2aSendExtent, a2aRecvExtent;
};

// Elements of a rank's input and output.
struct Shape {
  size_t inElems, outElems;
};
Shape shapeOf(const Call& c, int rank);

// A random call for a group of `nranks`; dataSeed seeds the ranks' inputs. drawCalls: usually
// one call, now and then two or three in one group.
Call drawCall(Rng& rng, int nranks, uint64_t dataSeed);
std::vector<Call> drawCalls(Rng& rng, int nranks, uint64_t dataSeed);
std::string describeCall(const Call& c);
std::string describeCalls(const std::vector<Call>& calls);

// Runs `calls` (more than one: in one group) with tessera on `comm` and with MPI on `mpi` (the
// same ranks; this rank is `rank`) and compares; "" when they agree, else what differs. Makes the
// same MPI calls whatever tessera does, so the ranks stay in step.
std::string runCalls(const std::vector<Call>& calls, tsrComm_t comm, MPI_Comm mpi, int rank,
                     int nranks);

}  // namespace tessera::test::crosscheck
