# SPDX-License-Identifier: BSL-1.0
# Runs gpu-async-demo with ARGS (one string, split like a shell would) and checks its exit code
# (EXPECT_RC) and that its output (stdout and stderr) matches EXPECT, or OR_EXPECT when given.
# Run as: cmake -DDEMO=<path> "-DARGS=--executor naive" -DEXPECT_RC=0 "-DEXPECT=<regex>"
#               [-DOR_EXPECT=<regex>] -P check_run.cmake
if(NOT DEMO OR NOT DEFINED EXPECT_RC OR NOT DEFINED EXPECT)
    message(FATAL_ERROR "pass -DDEMO=<path> -DARGS=<args> -DEXPECT_RC=<code> -DEXPECT=<regex>")
endif()
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${DEMO} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 120)
set(all "${out}\n${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
    message(FATAL_ERROR "gpu-async-demo ${ARGS}: exit '${rc}', expected ${EXPECT_RC}\n${all}")
endif()
if(all MATCHES "${EXPECT}")
    message(STATUS "gpu-async-demo ${ARGS}: exit ${rc}, output matches '${EXPECT}'")
elseif(DEFINED OR_EXPECT AND all MATCHES "${OR_EXPECT}")
    message(STATUS "gpu-async-demo ${ARGS}: exit ${rc}, output matches '${OR_EXPECT}'")
else()
    message(FATAL_ERROR "gpu-async-demo ${ARGS}: output does not match '${EXPECT}'\n${all}")
endif()
