# Stamps version, git commit and build settings into the binary for `model-optimizer --version`.
# The stamp is rewritten at every build (only when it changed), so a new commit shows without a reconfigure.
set(MO_BUILD_INFO_CPP "${PROJECT_BINARY_DIR}/generated/build_info.cpp")
add_custom_target(mo_build_info
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${MO_BUILD_INFO_CPP}
    -DPROJECT_VERSION=${PROJECT_VERSION} -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
    "-DCOMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
    -P ${PROJECT_SOURCE_DIR}/cmake/WriteBuildInfo.cmake
  BYPRODUCTS ${MO_BUILD_INFO_CPP}
  COMMENT "Stamping the git commit into build_info.cpp")
