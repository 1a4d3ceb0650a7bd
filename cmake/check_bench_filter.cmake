# ringpipe-bench refuses a --filter that would run nothing, before it runs anything: one that is no
# regular expression, and one that matches no benchmark (exit code 2, the reason on stderr, no file).
#   cmake -DPROGRAM=path -DWORK_DIR=dir -P check_bench_filter.cmake
file(MAKE_DIRECTORY "${WORK_DIR}")
set(json "${WORK_DIR}/refused.json")
foreach(case "(|is not a regular expression" "no_such_benchmark|matches no benchmark; it is searched for in: host_to_kernel")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 filter)
  list(GET parts 1 expected)
  file(REMOVE "${json}")
  execute_process(COMMAND "${PROGRAM}" --json "${json}" --filter "${filter}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${expected}" OR EXISTS "${json}")
    message(FATAL_ERROR "${PROGRAM} --filter '${filter}': exit code ${rc} (2 expected), stderr:\n${err}")
  endif()
endforeach()
