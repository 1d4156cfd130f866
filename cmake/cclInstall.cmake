# SPDX-License-Identifier: BSD-3-Clause
# Install rules and the CMake package, so that find_package(ccl) gives ccl::ccl.
include(CMakePackageConfigHelpers)
install(TARGETS ccl EXPORT cclTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ccl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT cclTargets NAMESPACE ccl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ccl)
configure_package_config_file(cmake/cclConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/cclConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ccl)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cclConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cclConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/cclConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ccl)
