# cmake -P script run by the mo_build_info target; writes OUTPUT from build_info.cpp.in.
execute_process(
  COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE MO_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR MO_GIT_COMMIT STREQUAL "")
  set(MO_GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
    OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    string(APPEND MO_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file("${SOURCE_DIR}/cmake/build_info.cpp.in" "${OUTPUT}" @ONLY)
