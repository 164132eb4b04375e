# Install rules, the CMake package (find_package(tessera) -> tessera::tessera) and tessera.pc.
install(TARGETS tessera EXPORT tesseraTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/tessera/tessera.h include/tessera/tessera.hpp
              ${PROJECT_BINARY_DIR}/include/tessera/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)
# The device API: the handles user kernels may use (tessera.h says so). They include only one
# another and system headers; tests/install/check_install.sh compiles each from the prefix alone.
install(DIRECTORY include/tessera/device DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera
        FILES_MATCHING PATTERN "*.hpp")
if(TESSERA_HAVE_MPI)
  install(FILES include/tessera/tessera_mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)
endif()

set(_cfgdir ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${_cfgdir})
configure_package_config_file(cmake/tesseraConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tesseraConfig.cmake INSTALL_DESTINATION ${_cfgdir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tesseraConfig.cmake ${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
        DESTINATION ${_cfgdir})

# The .pc file finds the prefix relative to its own folder, however deep the libdir is
# (lib, lib64, lib/x86_64-linux-gnu), so the package works under any --prefix.
file(RELATIVE_PATH TESSERA_PC_PREFIX_FROM_PCDIR "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig"
     "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" TESSERA_PC_PREFIX_FROM_PCDIR "${TESSERA_PC_PREFIX_FROM_PCDIR}")
configure_file(cmake/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
