# Compiler flags shared by every ROS2 target, and helpers to declare tests.

add_library(ros2_flags INTERFACE)
target_compile_options(ros2_flags INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
if(ROS2_WERROR)
  target_compile_options(ros2_flags INTERFACE -Werror)
endif()
if(ROS2_SANITIZE)
  target_compile_options(ros2_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(ros2_flags INTERFACE -fsanitize=address,undefined)
endif()

# The linker: lld (Debian package lld) when the compiler can use it. The build
# links about a hundred binaries, most of them tests against gRPC, RocksDB and
# UCX; lld links each in a fraction of GNU ld's time. Without lld, or with
# -DROS2_USE_LLD=OFF, the toolchain's default linker is used.
option(ROS2_USE_LLD "Link with lld when the compiler can use it" ON)
if(ROS2_USE_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" ROS2_HAVE_LLD)
  if(ROS2_HAVE_LLD)
    add_link_options(-fuse-ld=lld)
  endif()
endif()

# ros2_add_test(NAME <name> SOURCES <files...> LIBS <libs...> LABELS <labels...>
#               [TIMEOUT <seconds>] [ENV <VAR=value...>])
# Builds one GoogleTest binary and registers its tests with ctest under the given
# labels (the component names: common, vos, transport, engine, dfs, fuse).
# Every test also gets the label "unit" or "integration" from the caller.
# Binaries of "unit" tests are also dependencies of the target ros2_unit_tests,
# so a build for `ctest -L unit` alone (the sanitizer stage of .ci/run) can
# skip everything else.
if(ROS2_BUILD_TESTS AND NOT TARGET ros2_unit_tests)
  add_custom_target(ros2_unit_tests)
endif()
function(ros2_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;RESOURCE_LOCK" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  if(NOT ROS2_BUILD_TESTS)
    return()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  # ros2_test_support (src/testing): the tests' one Pattern, TempDir and engine harnesses.
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} ros2_test_support GTest::gtest GTest::gmock GTest::gtest_main
    ros2_flags)
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${T_TIMEOUT})
  # gtest_discover_tests flattens list-valued PROPERTIES (LABELS "engine;unit"
  # arrived as LABELS engine, so `ctest -L unit` matched nothing), and no
  # escaping survives its command line. Set the list-valued properties from a
  # ctest include file that runs after the discovered tests are defined.
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}[1]_tests.cmake")
  set(props_file "${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_properties.cmake")
  set(props "LABELS \"${T_LABELS}\"")
  if(T_ENV)
    string(APPEND props " ENVIRONMENT \"${T_ENV}\"")
  endif()
  # Tests that must not run at the same time as others holding the same lock
  # (ctest -j runs them one after another).
  if(T_RESOURCE_LOCK)
    string(APPEND props " RESOURCE_LOCK \"${T_RESOURCE_LOCK}\"")
  endif()
  file(WRITE "${props_file}"
    "if(EXISTS \"${tests_file}\")\n"
    "  file(STRINGS \"${tests_file}\" _ros2_lines REGEX \"^add_test\")\n"
    "  foreach(_ros2_line IN LISTS _ros2_lines)\n"
    "    if(_ros2_line MATCHES \"^add_test\\\\(\\\\[=\\\\[(.+)\\\\]=\\\\] \")\n"
    "      set_tests_properties(\"\${CMAKE_MATCH_1}\" PROPERTIES ${props})\n"
    "    endif()\n"
    "  endforeach()\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${props_file}")
  if("unit" IN_LIST T_LABELS)
    add_dependencies(ros2_unit_tests ${T_NAME})
  endif()
endfunction()
