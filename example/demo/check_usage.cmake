# SPDX-License-Identifier: BSL-1.0
# Checks that gpu-async-demo refuses wrong options with exit code 2 and two lines on stderr (the
# error, then a hint to --help), and that --help exits 0 with every line at most 100 characters
# and its examples whole. Run as: cmake -DDEMO=<path> -P check_usage.cmake
if(NOT DEMO)
    message(FATAL_ERROR "pass -DDEMO=<path to gpu-async-demo>")
endif()

function(expect_usage)
    execute_process(COMMAND ${DEMO} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err TIMEOUT 20)
    if(NOT rc EQUAL 2)
        message(FATAL_ERROR "gpu-async-demo ${ARGN}: exit ${rc}, expected 2\n${out}\n${err}")
    endif()
    if(NOT err MATCHES "^gpu-async-demo: [^\n]+\nTry 'gpu-async-demo --help' for the options\\.\n$")
        message(FATAL_ERROR "gpu-async-demo ${ARGN}: stderr is not one error line and the hint\n${err}")
    endif()
    if(NOT out STREQUAL "")
        message(FATAL_ERROR "gpu-async-demo ${ARGN}: a usage error printed on stdout\n${out}")
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
expect_usage(--http --executor io-uring)
expect_usage(--duration 0)

# A bad --executor names the kinds through errc::invalid_executor's text.
execute_process(COMMAND ${DEMO} --executor Naive RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 20)
if(NOT rc EQUAL 2 OR NOT err MATCHES "error \\[5\\]: invalid executor 'Naive': accepted names are naive, gpu-reactor, io-uring"
   OR NOT err MATCHES "Try 'gpu-async-demo --help'")
    message(FATAL_ERROR "gpu-async-demo --executor Naive: exit ${rc}, expected 2 with the coded "
                        "invalid_executor text and the hint\n${err}")
endif()
# A refused plan quotes at most 64 characters of a huge text: still one short line.
string(REPEAT "7" 4000 _sevens)
execute_process(COMMAND ${DEMO} --wait "plan:flag:park_us=${_sevens}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 20)
string(LENGTH "${err}" _len)
if(NOT rc EQUAL 2 OR _len GREATER 400 OR NOT err MATCHES "\\(4013 characters\\)")
    message(FATAL_ERROR "gpu-async-demo --wait plan:<4000 digits>: exit ${rc}, ${_len} bytes\n${err}")
endif()

execute_process(COMMAND ${DEMO} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 20)
if(NOT rc EQUAL 0 OR NOT out MATCHES "--connections")
    message(FATAL_ERROR "gpu-async-demo --help: exit ${rc}\n${out}\n${err}")
endif()
# No line wider than 100 characters (trailing blanks aside), and each example whole on its line.
string(REPLACE "\n" ";" _lines "${out}")
foreach(_line IN LISTS _lines)
    string(REGEX REPLACE " +$" "" _line "${_line}")
    string(LENGTH "${_line}" _len)
    if(_len GREATER 100)
        message(FATAL_ERROR "gpu-async-demo --help: a line of ${_len} characters:\n${_line}")
    endif()
endforeach()
foreach(_example IN ITEMS "  gpu-async-demo --wait plan:flag:park_us=100,backstop_us=1000\n"
                          "  gpu-async-demo --client-only --connect 127.0.0.1:5555 --duration 10\n"
                          "  curl 'http://127.0.0.1:8080/work?us=250'"
                          "  ab -k -l -n 2000 -c 8 'http://127.0.0.1:8080/work?us=20'")
    string(FIND "${out}" "${_example}" _at)
    if(_at EQUAL -1)
        message(FATAL_ERROR "gpu-async-demo --help: the example '${_example}' is not whole\n${out}")
    endif()
endforeach()
