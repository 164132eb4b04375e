# cmake -P helper of device_spill.cmake (the test device_kernels.no_spill): reads ptxas's -v
# reports of the device executor's kernel files (REPORTS, one per .cu file) and fails, naming the
# kernel, the architecture and the figure, when a function
#   - spills (nonzero "bytes spill stores" or "spill loads"),
#   - uses more than MAX_REGISTERS registers per thread (what a CTA of the kernels' launch bound
#     can hold), or
#   - has a stack frame above MAX_STACK bytes,
# or when a kernel of KERNELS is missing from the reports for an architecture in ARCHS. Lists
# arrive joined by "|".
cmake_minimum_required(VERSION 3.22)  # policies of a -P script (IN_LIST)
foreach(v REPORTS ARCHS KERNELS MAX_REGISTERS MAX_STACK)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "device_spill_check.cmake: ${v} is not set")
  endif()
endforeach()
string(REPLACE "|" ";" reports "${REPORTS}")
string(REPLACE "|" ";" archs "${ARCHS}")
string(REPLACE "|" ";" kernels "${KERNELS}")

set(failures "")
set(seen "")
set(table "")
set(quiet 0)  # out-of-line functions without stack frame or spills
foreach(report IN LISTS reports)
  if(NOT EXISTS "${report}")
    message(FATAL_ERROR "${report} does not exist: the compile of the collectives layer's CUDA "
                        "files leaves it (cmake/ptxas_report.sh); build tessera_collectives (after "
                        "touching the .cu file if its object is already built)")
  endif()
  get_filename_component(file ${report} NAME_WE)
  set(file "${file}.cu")
  file(STRINGS "${report}" lines)
  set(arch "")
  set(entry "")
  set(fn "")
  set(row "")  # the function being reported; ptxas gives entry functions a "Used N registers" line
  foreach(line IN LISTS lines)
    if(line MATCHES "Compiling entry function '([^']+)' for '(sm_[0-9]+[af]?)'")
      set(entry ${CMAKE_MATCH_1})
      set(arch ${CMAKE_MATCH_2})
    elseif(line MATCHES "Function properties for ([^ ]+)")
      set(fn ${CMAKE_MATCH_1})
    elseif(line MATCHES "([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
      set(stack ${CMAKE_MATCH_1})
      set(stores ${CMAKE_MATCH_2})
      set(loads ${CMAKE_MATCH_3})
      # Readable names: the kernels are tessera::exec::(anonymous)::<name>Kernel; other functions
      # keep their mangled name.
      set(short ${fn})
      if(fn MATCHES "[0-9]([a-z][A-Za-z]*Kernel)E")
        set(short ${CMAKE_MATCH_1})
      endif()
      list(APPEND seen "${arch}:${short}")
      if(NOT row STREQUAL "")
        string(APPEND table "${row}\n")
      endif()
      set(row "  ${file} ${arch} ${short}: stack ${stack} B, spill stores ${stores} B, spill loads ${loads} B")
      # Functions ptxas kept out of line (no registers line follows) are listed only when they
      # have a stack frame or spill; the others are counted.
      if(NOT fn STREQUAL entry AND stack EQUAL 0 AND stores EQUAL 0 AND loads EQUAL 0)
        math(EXPR quiet "${quiet} + 1")
        set(row "")
      endif()
      if(NOT stores EQUAL 0 OR NOT loads EQUAL 0)
        list(APPEND failures
          "${arch} ${short} (${file}): ${stores} bytes spill stores, ${loads} bytes spill loads")
      endif()
      if(stack GREATER MAX_STACK)
        list(APPEND failures
          "${arch} ${short} (${file}): ${stack} bytes stack frame, above the limit of ${MAX_STACK}")
      endif()
    elseif(line MATCHES "Used ([0-9]+) registers" AND NOT row STREQUAL "")
      string(APPEND table "${row}, ${CMAKE_MATCH_1} registers\n")
      set(row "")
      if(CMAKE_MATCH_1 GREATER MAX_REGISTERS)
        set(why "above the ${MAX_REGISTERS} a CTA of the launch bound can hold")
        list(APPEND failures "${arch} ${short} (${file}): ${CMAKE_MATCH_1} registers, ${why}")
      endif()
    endif()
  endforeach()
  if(NOT row STREQUAL "")
    string(APPEND table "${row}\n")
  endif()
endforeach()
message(STATUS "ptxas reports (limits: ${MAX_REGISTERS} registers, ${MAX_STACK} B stack frame, "
               "no spills):\n${table}  and ${quiet} out-of-line functions with no stack frame "
               "and no spills")

foreach(a IN LISTS archs)
  foreach(k IN LISTS kernels)
    if(NOT "sm_${a}:${k}" IN_LIST seen)
      list(APPEND failures "sm_${a} ${k}: not in the reports (was its file compiled for sm_${a}?)")
    endif()
  endforeach()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "the device executor's kernels break their resource limits or are "
                      "missing:\n  ${text}")
endif()
