// main() for tests run under mpirun: MPI is initialised around GoogleTest; every rank runs and
// prints its report, and the exit status is the worst over all ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = RUN_ALL_TESTS();
  // Every rank must agree: a failure on any rank fails all.
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst != 0 && rank == 0 && rc == 0) std::fprintf(stderr, "a test failed on another rank\n");
  MPI_Finalize();
  return worst;
}
