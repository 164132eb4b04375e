// --baseline mpi: MPI's own collective on the same buffers, in the same run (DESIGN.md,
// "Numbers, not adjectives"). The binaries' hook tables name MPI's collective (MpiColl), which
// runs through MpiArgs; the sweep calls the functions below, which exist in every build.
#pragma once

#include <string>

#include "coll_perf_common.hpp"
#include "coll_perf_options.hpp"
#include "core/build_config.hpp"

#if TESSERA_HAVE_MPI
#include <mpi.h>
#endif

namespace tessera::perf {

#if TESSERA_HAVE_MPI
// One MPI call: the same buffers, count and root as the tessera call beside it, over
// MPI_COMM_WORLD (one rank per process, rank numbers equal to tessera's).
struct MpiArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  int count = 0;  // the API's count (CollArgs::count)
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  MPI_Comm comm = MPI_COMM_NULL;
};
#endif

// Whether MPI can run the call that tessera runs; otherwise why not (e.g. MPI has no bfloat16).
// `note` gets a caveat when MPI runs a stand-in (avg and premulsum are timed as MPI_SUM).
bool mpiBaselineSupported(const CollHooks& hooks, const CollArgs& args, OpKind op,
                          std::string* whyNot, std::string* note);
// Runs MPI's collective for `args`; returns "" or the MPI error.
std::string mpiBaselineRun(const CollHooks& hooks, const CollArgs& args, OpKind op);
// The MPI library's own one-line name and version ("" without MPI).
std::string mpiLibraryText();

}  // namespace tessera::perf
