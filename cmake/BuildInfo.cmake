# Stamps version, git commit and build settings into the binary for `model-optimizer --version`.
execute_process(
  COMMAND git -C "${PROJECT_SOURCE_DIR}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE MO_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _git_rc)
if(NOT _git_rc EQUAL 0 OR MO_GIT_COMMIT STREQUAL "")
  set(MO_GIT_COMMIT "unknown")
endif()
set(MO_BUILD_INFO_CPP "${PROJECT_BINARY_DIR}/generated/build_info.cpp")
configure_file("${PROJECT_SOURCE_DIR}/cmake/build_info.cpp.in" "${MO_BUILD_INFO_CPP}" @ONLY)
