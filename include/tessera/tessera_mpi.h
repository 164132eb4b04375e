/* tessera over an existing MPI communicator (only in builds where MPI was found). */
#ifndef TESSERA_TESSERA_MPI_H_
#define TESSERA_TESSERA_MPI_H_

#include <mpi.h>

#include "tessera/tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over mpiComm: each MPI rank becomes the tessera rank of the same number. The MPI
 * communicator is duplicated; bootstrap traffic uses MPI (non-blocking, with deadlines). */
TSR_API tsrResult_t tsrCommInitMpi(tsrComm_t* comm, MPI_Comm mpiComm, tsrConfig_t* config);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TESSERA_MPI_H_ */
