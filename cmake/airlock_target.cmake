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

# Each library exposes only its own headers (docs/layering.md). Its PUBLIC
# include directory is ${PROJECT_BINARY_DIR}/include/<target>, which holds one
# symlink, <folder> -> the library's source folder (worker/runtime for
# airlock_worker_runtime), so `#include "folder/file.hpp"` resolves only in
# targets that link the library. Neither the repository root nor the binary
# root is a PUBLIC include directory of any library. Headers a library
# generates go to ${PROJECT_BINARY_DIR}/generated/<target>/<folder>/ (schema's
# Cap'n Proto headers, airlockd's build_info.hpp).
function(airlock_public_headers target folder)
  set(root ${PROJECT_BINARY_DIR}/include/${target})
  get_filename_component(parent ${root}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${folder} SYMBOLIC)
  target_include_directories(${target} PUBLIC ${root})
endfunction()

# airlock_library(NAME SOURCES ... DEPS ...): one library per folder, named
# airlock_NAME; its folder is the one whose CMakeLists.txt calls this. DEPS
# are PUBLIC, and cmake/layers.txt must allow each of them (the layering test
# checks it).
function(airlock_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(airlock_${name} STATIC ${ARG_SOURCES})
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  airlock_public_headers(airlock_${name} ${folder})
  target_link_libraries(airlock_${name} PUBLIC ${ARG_DEPS})
  airlock_settings(airlock_${name})
endfunction()

# airlock_test(NAME SOURCES ... DEPS ... LABELS label [TIMEOUT s] [WHOLE] [ROOT]): one
# GoogleTest executable per folder. One label per executable: gtest_discover_tests splits
# a list of labels into separate property arguments. WHOLE registers the
# executable as one ctest test instead of one per test case, for suites whose
# shared set-up is too expensive to repeat per case (a template build). ROOT
# adds the label `root` (the suite needs root: `ctest -LE root` leaves it out);
# without root its tests skip with the reason (AIRLOCK_REQUIRE_ROOT,
# tests/support/environment.hpp) and ctest reports them as not run.
function(airlock_test name)
  cmake_parse_arguments(ARG "WHOLE;ROOT" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  # Tests include their helpers as "tests/<folder>/...": the repository root,
  # PRIVATE only, so that it never reaches a library.
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} airlock_test_support GTest::gtest
                        GTest::gtest_main)
  airlock_settings(${name})
  target_compile_options(${name} PRIVATE ${AIRLOCK_TEST_COMPILE_OPTIONS})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(labels ${ARG_LABELS})
  if(ARG_ROOT)
    list(APPEND labels root)
  endif()
  if(ARG_WHOLE)
    add_test(NAME ${name} COMMAND ${name})
    # One test for many cases: not run when none of them ran (all skipped).
    set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT}
      SKIP_REGULAR_EXPRESSION "\\[  PASSED  \\] 0 tests")
    return()
  endif()
  # Discovered cases skip through GoogleTest's "[  SKIPPED ]" line, which
  # gtest_discover_tests maps to ctest's skipped.
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
  if(ARG_ROOT)
    # The second label goes on after discovery, from a ctest include file that
    # runs after the one gtest_discover_tests wrote (which sets ${name}_TESTS).
    set(label_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_root_label.cmake)
    file(WRITE ${label_file}
      "if(DEFINED ${name}_TESTS)\n"
      "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${ARG_LABELS};root\")\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${label_file})
  endif()
endfunction()
