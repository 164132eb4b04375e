# The fused ops across processes against MPI's own collectives (test_fused_mpi.cpp):
#   test_fused_mpi.np<N>       default transports (shm between the processes of this host)
#   test_fused_mpi.ucx.np<N>   TESSERA_TRANSPORT=ucx with UCX_TLS=tcp (when UCX is built)
# A rank whose call fails makes its peers fail within a minute, not the default 300 s.
tessera_mpi_test(test_fused_mpi SOURCES test_fused_mpi.cpp NP 2 4)
foreach(np 2 4)
  set_property(TEST test_fused_mpi.np${np} APPEND PROPERTY ENVIRONMENT
               "TESSERA_TRANSPORT_TIMEOUT=60")
  if(TESSERA_HAVE_UCX)
    add_test(NAME test_fused_mpi.ucx.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${TESSERA_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${np}
                     $<TARGET_FILE:test_fused_mpi>)
    get_test_property(test_fused_mpi.np${np} ENVIRONMENT _fused_env)
    set_tests_properties(test_fused_mpi.ucx.np${np} PROPERTIES LABELS "mpi"
      TIMEOUT ${TESSERA_TEST_TIMEOUT} PROCESSORS ${np} ENVIRONMENT "${_fused_env}")
    set_property(TEST test_fused_mpi.ucx.np${np} APPEND PROPERTY ENVIRONMENT
                 "TESSERA_TRANSPORT=ucx;UCX_TLS=tcp")
  endif()
endforeach()
target_link_libraries(test_fused_mpi PRIVATE tessera_fused_test_ref)
