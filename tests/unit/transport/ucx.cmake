# The ucx transport (needs UCX at build time; without it the factory's refusal is tested elsewhere).
if(TESSERA_HAVE_UCX)
  tessera_transport_test(test_transport_ucx SOURCES test_ucx.cpp)
endif()
