# Run at build time (cmake -P): stamps the current git commit into
# build_info.hpp. configure_file rewrites the header only when its content
# changes, so an unchanged commit rebuilds nothing.
# Inputs: SOURCE_DIR, INPUT, OUTPUT, AIRLOCK_VERSION.
set(AIRLOCK_GIT_COMMIT unknown)
find_program(GIT_EXECUTABLE git)
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${SOURCE_DIR}
    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE rc ERROR_QUIET)
  if(rc EQUAL 0 AND commit)
    set(AIRLOCK_GIT_COMMIT ${commit})
  endif()
endif()
configure_file(${INPUT} ${OUTPUT} @ONLY)
