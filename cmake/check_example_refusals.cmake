# The demos check their options before they run: producer_consumer refuses a --count or --duration
# that is no count or no span of time (before, "abc" aborted and "-3" ran 4,294,967,293 messages),
# a --dot FILE it cannot write and --dot with a soak; three_devices a --dot FILE it cannot write
# (exit code 2, nothing left behind). A graph that did not reach its file is a failure (exit 1).
#   cmake -DPRODUCER_CONSUMER=path -DTHREE_DEVICES=path -DWORK_DIR=dir -P check_example_refusals.cmake

include(${CMAKE_CURRENT_LIST_DIR}/expect_refusal.cmake)

file(MAKE_DIRECTORY "${WORK_DIR}")
foreach(value abc 0 -3 12x 4294967296)
  expect_refusal("${PRODUCER_CONSUMER}" 2 "--count takes a count from 1 to 4294967295, not '${value}'" OFF
                 --count ${value})
endforeach()
foreach(value abc 0 -1 inf)
  expect_refusal("${PRODUCER_CONSUMER}" 2 "--duration takes seconds above 0, not '${value}'" OFF --duration ${value})
endforeach()
set(unwritable "${WORK_DIR}/no-such-dir/graph.dot")
expect_refusal("${PRODUCER_CONSUMER}" 2 "cannot write ${unwritable}: No such file" OFF --dot "${unwritable}")
expect_refusal("${PRODUCER_CONSUMER}" 2 "--dot draws one run's graph, not a soak's" OFF
               --dot "${WORK_DIR}/refused.out" --duration 1)
expect_refusal("${PRODUCER_CONSUMER}" 1 "FAIL: cannot write /dev/full: No space left" OFF --dot /dev/full --count 1000)
expect_refusal("${THREE_DEVICES}" 2 "cannot write ${unwritable}: No such file" OFF --dot "${unwritable}")
