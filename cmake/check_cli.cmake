# A program's command line as a newcomer meets it: --help prints its usage and exits 0; an option
# it does not know is refused with the usage on stderr and exit code 2.
#   cmake -DPROGRAM=path -P check_cli.cmake
execute_process(COMMAND "${PROGRAM}" --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: ")
  message(FATAL_ERROR "${PROGRAM} --help: exit code ${rc}, output:\n${out}${err}")
endif()
execute_process(COMMAND "${PROGRAM}" --no-such-option RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "usage: ")
  message(FATAL_ERROR "${PROGRAM} --no-such-option: exit code ${rc} (2 expected), stderr:\n${err}")
endif()
