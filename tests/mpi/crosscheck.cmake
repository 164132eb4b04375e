# Randomized cross-check of the host collectives against MPI (test_crosscheck_mpi.cpp): random
# collective, datatype, op, count, in/out of place, on the world communicator and on split
# children, interleaved. The seed is printed; TESSERA_TEST_SEED replays it, and
# TESSERA_CROSSCHECK_CALLS sets the number of calls (scripts/crosscheck.sh N for long runs).
# ctest runs a bounded sample at 2, 3 and 4 ranks; a rank whose call fails makes its peers fail
# within a minute, not the default 300 s. OMPI_MCA_op=^avx: Open MPI's AVX reductions saturate
# 8- and 16-bit integer sums instead of wrapping (open-mpi/ompi#8045, "wontfix"), which would
# make the reference wrong; the test checks that its MPI wraps and says so when it does not.
tessera_mpi_test(test_crosscheck_mpi SOURCES test_crosscheck_mpi.cpp crosscheck_coll.cpp crosscheck_run.cpp
  NP 2 3 4)
foreach(np 2 3 4)
  set_property(TEST test_crosscheck_mpi.np${np} APPEND PROPERTY ENVIRONMENT
               "TESSERA_TRANSPORT_TIMEOUT=60;OMPI_MCA_op=^avx")
endforeach()
