# The tools as users run them: ringpipe-info, ringpipe-litmus, ringpipe-bench (included by CMakeLists.txt).

# ringpipe-info as users run it: exits 0 and lists the PoCL device, or fails clearly.
if(TARGET ringpipe-info)
  add_test(NAME info.json COMMAND ringpipe-info --json)
  set_tests_properties(info.json PROPERTIES TIMEOUT 60 ENVIRONMENT "${RUSTICL}" LABELS tool
    PASS_REGULAR_EXPRESSION "\"modes\": \\[\"persistent\", \"parked\", \"batched\"\\], \"persistent_budget\": [1-9].*\"modes\": \\[\"batched\"\\].*\"from\": 0, \"to\": 1, \"kind\": \"staged\"")
  add_test(NAME info.table COMMAND ringpipe-info)
  set_tests_properties(info.table PROPERTIES TIMEOUT 60 ENVIRONMENT "${POCL2}" LABELS tool
    PASS_REGULAR_EXPRESSION "ring-kernel modes persistent, parked, batched.*0   direct  direct")
  add_test(NAME info.no_platform COMMAND ringpipe-info)
  set_tests_properties(info.no_platform PROPERTIES TIMEOUT 60 WILL_FAIL FALSE
    ENVIRONMENT "OCL_ICD_VENDORS=${CMAKE_CURRENT_BINARY_DIR}/no-icd" LABELS tool
    PASS_REGULAR_EXPRESSION "no OpenCL platform found: install pocl-opencl-icd")
endif()

# The tools' command lines: --help, and an unknown option refused with exit code 2.
foreach(tool ringpipe-info ringpipe-litmus ringpipe-bench)
  if(TARGET ${tool})
    add_test(NAME ${tool}.cli COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${tool}>
      -P ${PROJECT_SOURCE_DIR}/cmake/check_cli.cmake)
    set_tests_properties(${tool}.cli PROPERTIES TIMEOUT 60 LABELS tool ENVIRONMENT "${POCL1}")
  endif()
endforeach()
# What would lose a tool's results is refused, and said (cmake/check_tool_refusals.cmake).
if(TARGET ringpipe-info AND TARGET ringpipe-litmus)
  set(bench_program "")
  if(TARGET ringpipe-bench)
    set(bench_program $<TARGET_FILE:ringpipe-bench>)
  endif()
  add_test(NAME tools.refusals COMMAND ${CMAKE_COMMAND} -DINFO=$<TARGET_FILE:ringpipe-info>
    -DLITMUS=$<TARGET_FILE:ringpipe-litmus> -DBENCH=${bench_program}
    -DPYTHON=${Python3_EXECUTABLE} -DSCRIPTS=${PROJECT_SOURCE_DIR}/scripts
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/tool-refusals -P ${PROJECT_SOURCE_DIR}/cmake/check_tool_refusals.cmake)
  set_tests_properties(tools.refusals PROPERTIES TIMEOUT 120 LABELS tool ENVIRONMENT "${POCL1}")
endif()

# ringpipe-litmus as users run it: on PoCL every kind of mapped memory holds (exit 0).
if(TARGET ringpipe-litmus)
  add_test(NAME litmus.tool COMMAND ringpipe-litmus --messages 20000)
  set_tests_properties(litmus.tool PROPERTIES TIMEOUT 120 ENVIRONMENT "${POCL1}" LABELS "tool;litmus"
    PASS_REGULAR_EXPRESSION "alloc_host_ptr \\| mem_fence \\| 256 slots \\| holds.*coarse_svm \\| mem_fence \\| 1 slot \\| holds: sent 2000,")
endif()

# ringpipe-info's link kinds are what two-kernel pipelines build, for every device pair.
if(TARGET ringpipe-info)
  ringpipe_test(link_agreement_test)
  target_compile_definitions(link_agreement_test PRIVATE RINGPIPE_INFO_PATH="$<TARGET_FILE:ringpipe-info>")
  ringpipe_add_ctest(links.two_pocl BINARY link_agreement_test ENV ${POCL2} LABELS "device;tool" TIMEOUT 300)
  ringpipe_add_ctest(links.pocl_rusticl BINARY link_agreement_test ENV ${RUSTICL} LABELS "device;tool" TIMEOUT 300)
endif()
