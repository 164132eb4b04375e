# Collectives across processes against MPI's own (test_coll_mpi.cpp). Each NP runs three ways:
#   test_coll_mpi.np<N>        default transports (shm between the processes of this host)
#   test_coll_mpi.ucx.np<N>    TESSERA_TRANSPORT=ucx with UCX_TLS=tcp (when UCX is built)
#   test_coll_mpi.hosts.np4    two emulated hosts (TESSERA_HOST_ID per rank), hierarchical
#                              family: shm within a host, ucx (tcp) between them
# A rank whose call fails makes its peers fail within a minute, not the default 300 s.
tessera_mpi_test(test_coll_mpi SOURCES test_coll_mpi.cpp NP 2 4)
foreach(np 2 4)
  set_property(TEST test_coll_mpi.np${np} APPEND PROPERTY ENVIRONMENT
               "TESSERA_TRANSPORT_TIMEOUT=60;GTEST_FILTER=CollMpi.*")
endforeach()

# Another ctest of the same executable, with `env` added to tessera_mpi_test's environment.
function(_tessera_coll_mpi_variant name np env)
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${TESSERA_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${np}
                   $<TARGET_FILE:test_coll_mpi>)
  get_test_property(test_coll_mpi.np${np} ENVIRONMENT _base)
  set_tests_properties(${name} PROPERTIES LABELS "mpi" TIMEOUT ${TESSERA_TEST_TIMEOUT}
    PROCESSORS ${np} ENVIRONMENT "${_base}")
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT ${env})
endfunction()

if(TESSERA_HAVE_UCX)
  foreach(np 2 4)
    _tessera_coll_mpi_variant(test_coll_mpi.ucx.np${np} ${np} "TESSERA_TRANSPORT=ucx;UCX_TLS=tcp")
  endforeach()
  # The base environment filters CollMpi.*; a later GTEST_FILTER wins.
  _tessera_coll_mpi_variant(test_coll_mpi.hosts.np4 4 "UCX_TLS=tcp;GTEST_FILTER=CollMpiHosts.*")
endif()
