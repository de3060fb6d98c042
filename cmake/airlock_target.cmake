# Shared compile settings for every airlock target.
set(AIRLOCK_WARNINGS -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
    -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference -Wformat=2)

if(AIRLOCK_SANITIZE)
  add_compile_options(-fsanitize=${AIRLOCK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${AIRLOCK_SANITIZE})
endif()

function(airlock_settings target)
  target_compile_options(${target} PRIVATE ${AIRLOCK_WARNINGS})
  if(AIRLOCK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# airlock_library(NAME SOURCES ... DEPS ...): one library per folder.
function(airlock_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(airlock_${name} STATIC ${ARG_SOURCES})
  target_include_directories(airlock_${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(airlock_${name} PUBLIC ${ARG_DEPS})
  airlock_settings(airlock_${name})
endfunction()

# airlock_test(NAME SOURCES ... DEPS ... LABELS label [TIMEOUT s] [WHOLE]): one GoogleTest
# executable per folder. One label per executable: gtest_discover_tests splits
# a list of labels into separate property arguments. WHOLE registers the
# executable as one ctest test instead of one per test case, for suites whose
# shared set-up is too expensive to repeat per case (a template build).
function(airlock_test name)
  cmake_parse_arguments(ARG "WHOLE" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  airlock_settings(${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(ARG_WHOLE)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
    return()
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
endfunction()
