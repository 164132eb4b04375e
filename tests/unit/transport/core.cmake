tessera_unit_test(test_transport_select SOURCES test_select.cpp
                  LAYERS tessera_core tessera_bootstrap tessera_topology tessera_transport)

# tessera_info names the transports of this build and what each peer class would use.
add_test(NAME tessera_info.transports COMMAND tessera_info)
set_tests_properties(tessera_info.transports PROPERTIES LABELS unit TIMEOUT 60
  PASS_REGULAR_EXPRESSION "same host, host ranks +-> shm")
