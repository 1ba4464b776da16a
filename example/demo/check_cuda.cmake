# SPDX-License-Identifier: BSL-1.0
# Checks gpu-async-demo --device cuda: on a machine with a CUDA driver and a capable device it
# runs (exit 0 with the table); without one it fails cleanly: exit 1 and exactly one coded line
# on stderr ("gpu-async-demo: error [<code>]: ... is unavailable: ..." or a driver call's coded
# error), never a crash. Run as: cmake -DDEMO=<path> -P check_cuda.cmake
if(NOT DEMO)
    message(FATAL_ERROR "pass -DDEMO=<path to gpu-async-demo>")
endif()

execute_process(COMMAND ${DEMO} --device cuda --duration 1 --connections 2 --work-us 50
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(rc EQUAL 0)
    if(NOT out MATCHES "requests/s" OR NOT out MATCHES "CUDA GPU 0")
        message(FATAL_ERROR "gpu-async-demo --device cuda: exit 0 without the table\n${out}\n${err}")
    endif()
    message(STATUS "gpu-async-demo --device cuda ran on a CUDA device")
elseif(rc EQUAL 1)
    string(REGEX MATCHALL "\n" newlines "${err}")
    list(LENGTH newlines lines)
    if(NOT lines EQUAL 1 OR NOT err MATCHES "^gpu-async-demo: error \\[[0-9]+\\]: [^\n]+\n$")
        message(FATAL_ERROR "gpu-async-demo --device cuda: exit 1 without one coded error line\n"
                            "stderr: ${err}\nstdout: ${out}")
    endif()
    if(NOT out STREQUAL "")
        message(FATAL_ERROR "gpu-async-demo --device cuda: failed, yet printed on stdout\n${out}")
    endif()
    message(STATUS "gpu-async-demo --device cuda failed cleanly: ${err}")
else()
    message(FATAL_ERROR "gpu-async-demo --device cuda: exit '${rc}' (expected 0, or 1 with a "
                        "coded error)\n${out}\n${err}")
endif()
