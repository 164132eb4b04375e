// tsrCommInitMpi: a communicator whose bootstrap is an MPI communicator.
#include "bootstrap/mpi_bootstrap.hpp"
#include "comm/api_guard.hpp"
#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/handles.hpp"
#include "core/env.hpp"
#include "tessera/tessera_mpi.h"

namespace {
constexpr tessera::Subsys kLogSubsys = tessera::Subsys::kInit;

tsrResult_t initMpi(tsrComm_t* comm, MPI_Comm mpiComm, tsrConfig_t* config) {
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
  BootstrapOptions opts;  // timeout: tsrConfig_t.timeoutMs, else TESSERA_BOOTSTRAP_TIMEOUT
  opts.timeoutSeconds = cfg.timeoutSeconds;
  // MPI_Comm_dup is collective: do it here, on the calling thread, even for a non-blocking init.
  std::unique_ptr<Bootstrap> boot;
  TSR_CHECK(MpiBootstrap::create(mpiComm, opts, &boot));
  ScopedRank scoped(boot->rank());
  std::shared_ptr<CommImpl> impl;
  Result r = CommImpl::createWith(std::move(boot), cfg, &impl);
  if (r != tsrSuccess && r != tsrInProgress) return r;
  *comm = handleRegister(CommAccess::wrap(std::move(impl)));
  return r;
}
}  // namespace

extern "C" TSR_API tsrResult_t tsrCommInitMpi(tsrComm_t* comm, MPI_Comm mpiComm,
                                              tsrConfig_t* config) {
  return tessera::guarded("tsrCommInitMpi", [&] { return initMpi(comm, mpiComm, config); });
}
