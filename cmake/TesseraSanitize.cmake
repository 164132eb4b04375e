# TESSERA_SANITIZE: build every target (library, tools, tests, GoogleTest when built from source)
# under GCC/Clang sanitizers. scripts/sanitize.sh configures it and runs the tests with the
# runtime options of tests/sanitize/. Values: "" (none), asan, ubsan, tsan, or a "+"-joined
# combination (asan+ubsan); tsan cannot be combined with asan.
set(TESSERA_SANITIZE "" CACHE STRING "Sanitizers to build with: \"\", asan, ubsan, tsan, asan+ubsan")
set_property(CACHE TESSERA_SANITIZE PROPERTY STRINGS "" asan ubsan tsan asan+ubsan)

set(TESSERA_SANITIZE_FLAGS "")
if(NOT TESSERA_SANITIZE STREQUAL "")
  string(TOLOWER "${TESSERA_SANITIZE}" _san)
  string(REPLACE "+" ";" _san "${_san}")
  set(_fsan "")
  foreach(s IN LISTS _san)
    if(s STREQUAL "asan")
      list(APPEND _fsan address)
    elseif(s STREQUAL "ubsan")
      list(APPEND _fsan undefined)
    elseif(s STREQUAL "tsan")
      list(APPEND _fsan thread)
    else()
      message(FATAL_ERROR "TESSERA_SANITIZE=${TESSERA_SANITIZE}: '${s}' is not one of asan, ubsan, "
                          "tsan (join several with +)")
    endif()
  endforeach()
  if("address" IN_LIST _fsan AND "thread" IN_LIST _fsan)
    message(FATAL_ERROR "TESSERA_SANITIZE=${TESSERA_SANITIZE}: asan and tsan cannot be combined")
  endif()
  list(REMOVE_DUPLICATES _fsan)
  list(JOIN _fsan "," _fsan)
  set(TESSERA_SANITIZE_FLAGS -fsanitize=${_fsan} -fno-omit-frame-pointer)
  if(_fsan MATCHES "undefined")
    # A finding fails the test (the process exits non-zero) instead of printing and going on.
    list(APPEND TESSERA_SANITIZE_FLAGS -fno-sanitize-recover=undefined)
  endif()
  if(_fsan MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC warns (-Wtsan) that TSan does not model std::atomic_thread_fence; the library has one
    # (HostMappedConnection::doFlush) and keeps it. The warning stays visible, not an error: the
    # stores it orders are also published by the release of the signal that follows them, which
    # TSan does see.
    list(APPEND TESSERA_SANITIZE_FLAGS -Wno-error=tsan)
  endif()
  # Compile and link of every target below (add_* applies to targets created after this point).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${TESSERA_SANITIZE_FLAGS}>")
  add_link_options(${TESSERA_SANITIZE_FLAGS})
  if(TESSERA_HAVE_CUDA)
    # Only host C/C++ is instrumented; nvcc's host compile of .cu files is not, and the CUDA
    # runtime under ASan needs ASAN_OPTIONS=protect_shadow_gap=0. scripts/sanitize.sh builds
    # without CUDA.
    message(WARNING "TESSERA_SANITIZE=${TESSERA_SANITIZE} with CUDA: .cu files are not "
                    "instrumented; scripts/sanitize.sh configures with TESSERA_WITH_CUDA=OFF")
  endif()
endif()
