# `cmake --install`: the iris executable, libiris (versioned soname), the public headers, a
# CMake package (find_package(iris) -> iris::iris; its component cuda -> iris::iris_cuda, cmake/irisConfig.cmake.in),
# iris.pc, the license and the release notes.
include(CMakePackageConfigHelpers)

install(TARGETS iris RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The man page and the bash completion script, made by the built iris from its own options.
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/iris.1 ${CMAKE_CURRENT_BINARY_DIR}/iris.bash
  COMMAND sh -c "$<TARGET_FILE:iris> man > ${CMAKE_CURRENT_BINARY_DIR}/iris.1"
  COMMAND sh -c "$<TARGET_FILE:iris> completion bash > ${CMAKE_CURRENT_BINARY_DIR}/iris.bash"
  DEPENDS iris VERBATIM)
add_custom_target(iris_shell_docs ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/iris.1 ${CMAKE_CURRENT_BINARY_DIR}/iris.bash)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/iris.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/iris.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME iris)
set(IRIS_EXPORTED libiris)
if(IRIS_HAVE_CUDA)
  list(APPEND IRIS_EXPORTED iris_cuda)
endif()
install(TARGETS ${IRIS_EXPORTED} EXPORT irisTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/iris/iris.h include/iris/iris_cuda.h include/iris/iris.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/iris)
install(FILES LICENSE CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(EXPORT irisTargets NAMESPACE iris:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/iris)

set(IRIS_CONFIG_HAS_CUDA ${IRIS_HAVE_CUDA})
configure_package_config_file(cmake/irisConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/irisConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/iris)
# The C ABI is stable within a major version of the ABI, not of the release: SameMajorVersion
# of the release is the closest CMake offers and is what 0.x promises (docs/API.md, Stability).
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/irisConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/irisConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/irisConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/iris)

# Relative to the .pc file, so that `cmake --install --prefix ANYWHERE` gives a working iris.pc.
file(RELATIVE_PATH IRIS_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(cmake/iris.pc.in ${CMAKE_CURRENT_BINARY_DIR}/iris.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/iris.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
