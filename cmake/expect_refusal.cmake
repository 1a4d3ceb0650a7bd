# expect_refusal(program code expected full args...): runs `program` with `args` and fails unless it
# exits with `code`, its stderr matches `expected`, and it left no ${WORK_DIR}/refused.out behind;
# with `full` ON its standard output goes to /dev/full (a disk with no room).
function(expect_refusal program code expected full)
  set(left "${WORK_DIR}/refused.out")
  file(REMOVE "${left}")
  if(full)
    set(out OUTPUT_FILE /dev/full)
  else()
    set(out OUTPUT_QUIET)
  endif()
  execute_process(COMMAND "${program}" ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err ${out})
  if(NOT rc EQUAL code OR NOT err MATCHES "${expected}" OR EXISTS "${left}")
    string(REPLACE ";" " " args "${ARGN}")
    message(FATAL_ERROR "${program} ${args}: exit code ${rc} (${code} expected), stderr:\n${err}")
  endif()
endfunction()
