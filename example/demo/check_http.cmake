# SPDX-License-Identifier: BSL-1.0
# Checks gpu-async-demo --http with its built-in load generator: HTTP/1.1 through Beast on both
# sides, keep-alive, for about a second. From the --json summary: the protocol is http; requests
# were answered; the server sent exactly as many HTTP responses as the load generator counted
# replies (every one 200 with the JSON timings, or the generator fails the run), none other than
# 2xx; one connection per client connection (keep-alive held); no failed connection.
# Run as: cmake -DDEMO=<path> -P check_http.cmake
if(NOT DEMO)
    message(FATAL_ERROR "pass -DDEMO=<path to gpu-async-demo>")
endif()

execute_process(COMMAND ${DEMO} --http --duration 1 --connections 2 --work-us 50 --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gpu-async-demo --http: exit '${rc}'\n${out}\n${err}")
endif()
if(NOT err MATCHES "an HTTP/1.1 server on one thread")
    message(FATAL_ERROR "gpu-async-demo --http: the first line does not say HTTP\n${err}")
endif()

function(field var)
    string(JSON _value ERROR_VARIABLE _error GET "${out}" ${ARGN})
    if(_error)
        message(FATAL_ERROR "gpu-async-demo --http --json: no ${ARGN} (${_error})\n${out}")
    endif()
    set(${var} "${_value}" PARENT_SCOPE)
endfunction()

field(protocol protocol)
field(requests requests)
field(responses http responses)
field(not_2xx http not_2xx)
field(connections http connections)
field(failed failed_connections)
field(c2h_p50 completion_to_handler_ns p50)
if(NOT protocol STREQUAL "http" OR NOT requests GREATER 0 OR NOT responses EQUAL requests
   OR NOT not_2xx EQUAL 0 OR NOT connections EQUAL 2 OR NOT failed EQUAL 0)
    message(FATAL_ERROR "gpu-async-demo --http: protocol ${protocol}, ${requests} requests, "
                        "${responses} responses (${not_2xx} not 2xx), ${connections} connections, "
                        "${failed} failed\n${out}\n${err}")
endif()
message(STATUS "gpu-async-demo --http: ${requests} requests, ${responses} HTTP responses over "
               "${connections} keep-alive connections; completion-to-handler p50 ${c2h_p50} ns")
