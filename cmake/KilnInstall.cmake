# install() rules: libkiln (with its SONAME), the public headers, the CLI, a CMake package
# (kilnConfig.cmake exporting kiln::kiln) and kiln.pc. Two layouts:
#  - `cmake --install build --prefix P`: P/bin/kiln, P/lib/libkiln.so.*, P/include/kiln/,
#    P/lib/cmake/kiln/, P/lib/pkgconfig/kiln.pc;
#  - `pip install .` (scikit-build-core sets SKBUILD): everything inside the Python package,
#    site-packages/kiln/{bin,lib,include}, next to the extension kiln/_kiln.*.so, so that one
#    directory is the whole installation (kiln.cmake_prefix_path() returns it).
include(CMakePackageConfigHelpers)

if(SKBUILD)
  set(KILN_INSTALL_ROOT kiln/)
else()
  set(KILN_INSTALL_ROOT "")
endif()
set(KILN_INSTALL_BINDIR ${KILN_INSTALL_ROOT}${CMAKE_INSTALL_BINDIR})
set(KILN_INSTALL_LIBDIR ${KILN_INSTALL_ROOT}${CMAKE_INSTALL_LIBDIR})
set(KILN_INSTALL_INCLUDEDIR ${KILN_INSTALL_ROOT}${CMAKE_INSTALL_INCLUDEDIR})
set(KILN_INSTALL_CMAKEDIR ${KILN_INSTALL_LIBDIR}/cmake/kiln)
set(KILN_INSTALL_PKGCONFIGDIR ${KILN_INSTALL_LIBDIR}/pkgconfig)

add_library(kiln::kiln ALIAS kiln)  # the same name in the build tree as in an installation
target_include_directories(kiln PUBLIC $<INSTALL_INTERFACE:${KILN_INSTALL_INCLUDEDIR}>)
# The public headers use C++20; consumers of kiln::kiln get it without asking.
target_compile_features(kiln PUBLIC cxx_std_20)

# Installed binaries find libkiln relative to themselves; libraries found outside the system
# directories at link time (CUDA, a local oneDNN) stay on the RPATH.
file(RELATIVE_PATH KILN_BIN_TO_LIB ${CMAKE_INSTALL_PREFIX}/${KILN_INSTALL_BINDIR} ${CMAKE_INSTALL_PREFIX}/${KILN_INSTALL_LIBDIR})
set_target_properties(kiln PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
set_target_properties(kiln_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${KILN_BIN_TO_LIB}" INSTALL_RPATH_USE_LINK_PATH TRUE)

install(TARGETS kiln EXPORT kilnTargets
        LIBRARY DESTINATION ${KILN_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
        INCLUDES DESTINATION ${KILN_INSTALL_INCLUDEDIR})
install(TARGETS kiln_cli RUNTIME DESTINATION ${KILN_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/kiln DESTINATION ${KILN_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES ${KILN_GENERATED_INCLUDE}/kiln/version.h DESTINATION ${KILN_INSTALL_INCLUDEDIR}/kiln)

install(EXPORT kilnTargets NAMESPACE kiln:: FILE kilnTargets.cmake DESTINATION ${KILN_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/kilnConfig.cmake.in ${CMAKE_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
# 0.x: another minor version is another ABI (and reads no plans of this one).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(KILN_COMPAT SameMinorVersion)
else()
  set(KILN_COMPAT SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake COMPATIBILITY ${KILN_COMPAT})
install(FILES ${CMAKE_BINARY_DIR}/kilnConfig.cmake ${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${KILN_INSTALL_CMAKEDIR})

# kiln.pc, relocatable: the prefix is found from the .pc file's own directory.
file(RELATIVE_PATH KILN_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${KILN_INSTALL_PKGCONFIGDIR} ${CMAKE_INSTALL_PREFIX}/${KILN_INSTALL_ROOT})
string(REGEX REPLACE "/$" "" KILN_PC_TO_PREFIX "${KILN_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/kiln.pc.in ${CMAKE_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/kiln.pc DESTINATION ${KILN_INSTALL_PKGCONFIGDIR})

if(SKBUILD)
  if(TARGET kiln_python)
    set_target_properties(kiln_python PROPERTIES INSTALL_RPATH "$ORIGIN/${CMAKE_INSTALL_LIBDIR}" INSTALL_RPATH_USE_LINK_PATH TRUE)
    install(TARGETS kiln_python LIBRARY DESTINATION kiln)
    install(FILES ${KILN_PY_FILES} DESTINATION kiln)
  else()
    message(FATAL_ERROR "pip install: the Python module cannot be built (pybind11 not found)")
  endif()
else()
  install(FILES ${CMAKE_SOURCE_DIR}/LICENSE ${CMAKE_SOURCE_DIR}/THIRD_PARTY_NOTICES.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/kiln)
endif()
