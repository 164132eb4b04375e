# Warnings for tessera's own targets (not for GoogleTest or other third-party code).
add_library(tessera_warnings INTERFACE)
target_compile_options(tessera_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow=local -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX,C>,$<BOOL:${TESSERA_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${TESSERA_WERROR}>>:--Werror=all-warnings>)
