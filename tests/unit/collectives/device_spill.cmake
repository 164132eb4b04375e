# The device executor's kernels must not spill (issue 5, "Build": no spills reported by
# -Xptxas -v in the hot kernels). Every CUDA file of the collectives layer (the kernel files of
# collectives/exec/device, one per interpreter kernel plus kernels.cu) compiles with ptxas's
# resource report, which the layer's compiler launcher keeps in TESSERA_PTXAS_REPORT_DIR/<file>.txt
# (collectives/CMakeLists.txt, cmake/ptxas_report.sh): the report of the library's own compile,
# for every architecture it is built for. The test device_kernels.no_spill reads those reports
# and fails, naming kernel, architecture and figure, on any spill, on more registers than a CTA
# of the kernels' launch bound allows, on a stack frame above the limit below, or when a kernel
# or a report is missing. Without CUDA there is nothing to check and that test is not
# registered. Next to it: the launchers' and stream operations' host-side answers (unit), and
# the same on a GPU (gpu: resources, wait/write, capture).
tessera_unit_test(test_device_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_spill_kernels_test.cpp)
if(NOT TESSERA_HAVE_CUDA)
  message(STATUS "device_kernels.no_spill: not registered (this build has no CUDA)")
  return()
endif()
tessera_gpu_test(test_device_kernels_gpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_spill_gpu_test.cpp)

# Every .cu file of the collectives layer, from its target: a kernel file added to
# collectives/exec/device/sources.cmake is checked without a change here.
get_target_property(_spill_layer_sources tessera_collectives SOURCES)
get_target_property(_spill_layer_dir tessera_collectives SOURCE_DIR)
set(_spill_sources "")
foreach(s IN LISTS _spill_layer_sources)
  if(s MATCHES "\\.cu$")
    cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${_spill_layer_dir} NORMALIZE OUTPUT_VARIABLE _abs)
    list(APPEND _spill_sources ${_abs})
  endif()
endforeach()
if(NOT _spill_sources)
  message(FATAL_ERROR "device_kernels.no_spill: tessera_collectives has no .cu file")
endif()
# The kernels the reports must hold for every architecture (their names in the mangled symbol).
set(_spill_kernels residentKernel itemKernel sendRecvItemKernel triggerKernel sendRecvTriggerKernel)

# Registers: the resident and item kernels are compiled with __launch_bounds__(kThreads, 1)
# (kernels_common.hpp, read here so the limit follows the bound): a CTA of kThreads threads must
# fit the 65536 registers of an SM (sm_80, sm_90), allocated per thread in multiples of 8, and no
# thread has more than 255. For kThreads = 256 that is 255. ptxas honours the bound by spilling,
# so a register count above it means the bound itself went missing.
file(STRINGS ${PROJECT_SOURCE_DIR}/collectives/exec/device/kernels_common.hpp _spill_bound
  REGEX "kThreads = [0-9]+")
if(NOT _spill_bound MATCHES "kThreads = ([0-9]+)")
  message(FATAL_ERROR "device_kernels.no_spill: no kThreads in kernels_common.hpp")
endif()
math(EXPR _spill_max_registers "65536 / ${CMAKE_MATCH_1} / 8 * 8")
if(_spill_max_registers GREATER 255)
  set(_spill_max_registers 255)
endif()
# Stack frame (per thread, in local memory; not a spill: what the interpreter indexes at run time
# or passes by address, such as the per-worker pc[] and target_[] arrays of kMaxCtaWorkers
# entries and the backend object). With CUDA 13, -O2, sm_80 and sm_90 alike (the library's own
# compile, 2026-12-06): residentKernel 608 B, itemKernel 528 B, sendRecvItemKernel 544 B, the
# triggers 0. The limit leaves a quarter over the largest, so a change that grows it much (a local
# array, an uninlined call chain) is seen and the limit raised on purpose, with the new figures
# here.
set(_spill_max_stack 768)

# Real architectures only ("90", "80", "90a", "90-real"); virtual-only entries have no ptxas step.
set(_spill_archs "")
foreach(a IN LISTS CMAKE_CUDA_ARCHITECTURES)
  if(a MATCHES "^([0-9]+[af]?)(-real)?$")
    list(APPEND _spill_archs ${CMAKE_MATCH_1})
  elseif(NOT a MATCHES "-virtual$")
    message(WARNING "device_kernels.no_spill: architecture '${a}' is not checked for spills")
  endif()
endforeach()

set(_spill_reports "")
foreach(src IN LISTS _spill_sources)
  cmake_path(GET src STEM _name)
  list(APPEND _spill_reports ${TESSERA_PTXAS_REPORT_DIR}/${_name}.txt)
endforeach()

string(REPLACE ";" "|" _spill_arch_arg "${_spill_archs}")
string(REPLACE ";" "|" _spill_report_arg "${_spill_reports}")
string(REPLACE ";" "|" _spill_kernel_arg "${_spill_kernels}")
add_test(NAME device_kernels.no_spill
  COMMAND ${CMAKE_COMMAND} -DREPORTS=${_spill_report_arg} -DARCHS=${_spill_arch_arg}
    -DKERNELS=${_spill_kernel_arg} -DMAX_REGISTERS=${_spill_max_registers}
    -DMAX_STACK=${_spill_max_stack}
    -P ${CMAKE_CURRENT_LIST_DIR}/device_spill_check.cmake)
set_tests_properties(device_kernels.no_spill PROPERTIES LABELS unit TIMEOUT 60)
