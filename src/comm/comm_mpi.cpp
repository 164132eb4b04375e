// tsrCommInitMpi: a communicator whose bootstrap is an MPI communicator.
#include "bootstrap/mpi_bootstrap.hpp"
#include "comm/comm_impl.hpp"
#include "comm/handles.hpp"
#include "core/env.hpp"
#include "tessera/tessera_mpi.h"

namespace {
constexpr tessera::Subsys kLogSubsys = tessera::Subsys::kInit;
}

extern "C" TSR_API tsrResult_t tsrCommInitMpi(tsrComm_t* comm, MPI_Comm mpiComm,
                                              tsrConfig_t* config) {
  using namespace tessera;
  if (comm == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommInitMpi: comm is NULL");
  *comm = nullptr;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return TSR_FAIL(tsrInvalidUsage, "tsrCommInitMpi: MPI is not initialized");
  if (mpiComm == MPI_COMM_NULL)
    return TSR_FAIL(tsrInvalidArgument, "tsrCommInitMpi: mpiComm is MPI_COMM_NULL");
  TSR_CHECK(envValidateAll());
  CommConfig cfg;
  TSR_CHECK(resolveConfig(config, nullptr, &cfg));
  BootstrapOptions opts;  // timeout: TESSERA_BOOTSTRAP_TIMEOUT, validated above
  // MPI_Comm_dup is collective: do it here, on the calling thread, even for a non-blocking init.
  std::unique_ptr<Bootstrap> boot;
  TSR_CHECK(MpiBootstrap::create(mpiComm, opts, &boot));
  auto holder = std::make_shared<std::unique_ptr<Bootstrap>>(std::move(boot));
  int rank = (*holder)->rank();
  ScopedRank scoped(rank);
  std::shared_ptr<CommImpl> impl;
  Result r = CommImpl::create(
      rank, (*holder)->nranks(), cfg,
      [holder](int, std::unique_ptr<Bootstrap>* b) {
        *b = std::move(*holder);
        return tsrSuccess;
      },
      &impl);
  if (r != tsrSuccess && r != tsrInProgress) return r;
  *comm = handleRegister(std::make_unique<Communicator>(std::move(impl)));
  return r;
}
