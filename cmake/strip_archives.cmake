# Run by cpack before it packs (CPACK_PRE_BUILD_SCRIPTS): the static libraries lose their debug
# information (120 MB of it); the build tree keeps it.
file(GLOB_RECURSE archives "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*.a")
foreach(a ${archives})
  execute_process(COMMAND strip --strip-debug "${a}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "strip --strip-debug ${a} failed (${rc})")
  endif()
endforeach()
