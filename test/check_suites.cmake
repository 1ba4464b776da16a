# SPDX-License-Identifier: BSL-1.0
# ctest runs a unit executable suite by suite (test/CMakeLists.txt registers one test per
# top-level BOOST_AUTO_TEST_SUITE found in its sources). This check fails when the executable
# holds a top-level test unit that is not one of those suites (a case outside any suite, or a
# suite the scan missed), so no test can be built and never run.
#   cmake -DEXE=<unit executable> "-DSUITES=<a;b;...>" -P check_suites.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${EXE} --list_content ERROR_VARIABLE listing OUTPUT_VARIABLE out
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} --list_content failed (${rc}): ${listing}${out}")
endif()
string(REPLACE "\n" ";" lines "${listing}${out}")
set(missing)
set(count 0)
foreach(line IN LISTS lines)
    if(line MATCHES "^([A-Za-z0-9_]+)[* ]?$")
        math(EXPR count "${count} + 1")
        if(NOT CMAKE_MATCH_1 IN_LIST SUITES)
            list(APPEND missing ${CMAKE_MATCH_1})
        endif()
    endif()
endforeach()
if(missing)
    message(FATAL_ERROR "${EXE}: top-level test units that ctest does not run: ${missing} "
                        "(put each test case in a BOOST_AUTO_TEST_SUITE)")
endif()
if(count EQUAL 0)
    message(FATAL_ERROR "${EXE} --list_content listed no test unit")
endif()
message(STATUS "${count} top-level suites, each run by ctest")
