# The tools refuse what would lose their results, and say why: ringpipe-bench a --filter that is no
# regular expression or matches no benchmark, and a --json FILE it cannot write, before it runs
# anything (exit code 2, no file left); ringpipe-litmus a --json FILE that is a directory; both,
# and ringpipe-info, output that did not reach standard output (exit code 1); the result-file
# scripts a file that is no JSON.
#   cmake -DINFO=path -DLITMUS=path [-DBENCH=path] [-DPYTHON=path -DSCRIPTS=dir] -DWORK_DIR=dir
#         -P check_tool_refusals.cmake

include(${CMAKE_CURRENT_LIST_DIR}/expect_refusal.cmake)

file(MAKE_DIRECTORY "${WORK_DIR}")
set(json "${WORK_DIR}/refused.out") # what no refused run may leave
if(BENCH)
  expect_refusal("${BENCH}" 2 "is not a regular expression" OFF --json "${json}" --filter "(")
  expect_refusal("${BENCH}" 2 "matches no benchmark; it is searched for in: host_to_kernel" OFF
                 --json "${json}" --filter no_such_benchmark)
  expect_refusal("${BENCH}" 2 "cannot write ${WORK_DIR}/no-such-dir/x.json: No such file" OFF
                 --json "${WORK_DIR}/no-such-dir/x.json" --filter versus)
endif()
expect_refusal("${LITMUS}" 2 "cannot write ${WORK_DIR}: it is a directory" OFF --json "${WORK_DIR}")
expect_refusal("${LITMUS}" 1 "cannot write to standard output" ON --messages 100)
expect_refusal("${INFO}" 1 "cannot write to standard output" ON --json)
# The scripts that read result files: one that is no JSON is said to be no result file.
if(PYTHON)
  file(WRITE "${WORK_DIR}/not-json.json" "{not json")
  expect_refusal("${PYTHON}" 1 "not-json.json is not a result file" OFF "${SCRIPTS}/bench-targets.py"
                 "${WORK_DIR}/not-json.json")
endif()
# ringpipe-info --measure prints a table: with --json it is refused, not ignored.
expect_refusal("${INFO}" 2 "--measure prints a table, not JSON" OFF --json --measure)
