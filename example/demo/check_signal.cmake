# SPDX-License-Identifier: BSL-1.0
# Checks that SIGINT and SIGTERM stop gpu-async-demo early with the summary printed and exit 0:
# a 60 s run is sent the signal after 2 s by timeout(1). Run as:
#   cmake -DDEMO=<path> -DTIMEOUT=<path to timeout> -P check_signal.cmake
if(NOT DEMO OR NOT TIMEOUT)
    message(FATAL_ERROR "pass -DDEMO=<path to gpu-async-demo> -DTIMEOUT=<path to timeout>")
endif()

function(expect_stop signal)
    execute_process(COMMAND ${TIMEOUT} --preserve-status -s ${signal} 2 ${DEMO} --duration 60
                            --connections 2 ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 40)
    set(all "${out}\n${err}")
    if(NOT rc STREQUAL "0")
        message(FATAL_ERROR "gpu-async-demo ${ARGN} sent SIG${signal}: exit '${rc}'\n${all}")
    endif()
    if(NOT err MATCHES "SIG${signal} after [0-9.]+ s: stopping, summary so far")
        message(FATAL_ERROR "gpu-async-demo ${ARGN}: no stop line for SIG${signal}\n${all}")
    endif()
    if(ARGN MATCHES "--json")
        if(NOT out MATCHES "\"stopped_by\":\"SIG${signal}\"" OR NOT out MATCHES "\"requests\":[1-9]")
            message(FATAL_ERROR "gpu-async-demo ${ARGN}: JSON without the stop or requests\n${all}")
        endif()
    elseif(NOT out MATCHES "stopped early by SIG${signal}" OR NOT out MATCHES "requests/s +[1-9]")
        message(FATAL_ERROR "gpu-async-demo ${ARGN}: no summary after SIG${signal}\n${all}")
    endif()
    message(STATUS "gpu-async-demo ${ARGN}: SIG${signal} stopped it with the summary")
endfunction()

expect_stop(INT)
expect_stop(TERM --json)
expect_stop(INT --wait fill)
