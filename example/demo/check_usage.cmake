# Checks that gpu-async-demo refuses wrong options with exit code 2 and the usage on stderr,
# and accepts --help with exit code 0. Run as: cmake -DDEMO=<path> -P check_usage.cmake
if(NOT DEMO)
    message(FATAL_ERROR "pass -DDEMO=<path to gpu-async-demo>")
endif()

function(expect_usage)
    execute_process(COMMAND ${DEMO} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err TIMEOUT 20)
    if(NOT rc EQUAL 2)
        message(FATAL_ERROR "gpu-async-demo ${ARGN}: exit ${rc}, expected 2\n${out}\n${err}")
    endif()
    if(NOT err MATCHES "usage: gpu-async-demo")
        message(FATAL_ERROR "gpu-async-demo ${ARGN}: no usage on stderr\n${err}")
    endif()
endfunction()

expect_usage(--no-such-option)
expect_usage(--duration)
expect_usage(--duration abc)
expect_usage(--duration -1)
expect_usage(--connections 0)
expect_usage(--wait nonsense)
expect_usage(--wait plan:flag:park_us=0)
expect_usage(--device tpu)
expect_usage(--server-only --client-only)
expect_usage(--client-only --connect 10.0.0.1:80)
expect_usage(--client-only --connect 127.0.0.1:99999)
expect_usage(--connect 127.0.0.1:80)
expect_usage(stray-argument)
expect_usage(--executor nonsense)
expect_usage(--executor naive --wait fill)

# A bad --executor names the kinds through errc::invalid_executor's text.
execute_process(COMMAND ${DEMO} --executor Naive RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 20)
if(NOT rc EQUAL 2 OR NOT err MATCHES "error \\[5\\]: invalid executor 'Naive': accepted names are naive, gpu-reactor, io-uring"
   OR NOT err MATCHES "usage: gpu-async-demo")
    message(FATAL_ERROR "gpu-async-demo --executor Naive: exit ${rc}, expected 2 with the coded "
                        "invalid_executor text and the usage\n${err}")
endif()

execute_process(COMMAND ${DEMO} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 20)
if(NOT rc EQUAL 0 OR NOT out MATCHES "--connections")
    message(FATAL_ERROR "gpu-async-demo --help: exit ${rc}\n${out}\n${err}")
endif()
