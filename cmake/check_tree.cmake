# The tree's own rules, run by ctest (tree.layers): lower layers never include higher ones, no
# file of the library is over 400 lines, and no page of the documentation over about 400.
#   core <- actor <- {kernel, link} <- pipeline <- coord <- mpi; kernel and link do not know each other.
#   cmake -DROOT=<source dir> -P cmake/check_tree.cmake
cmake_policy(SET CMP0007 NEW)
set(higher_than_core "ringpipe/(kernel|link|pipeline|plan|placement)\\.hpp|\\.\\./(actor|kernel|link|pipeline)/")
set(rules
  "core|${higher_than_core}"
  "actor|ringpipe/(kernel|link|pipeline|plan|placement|metrics)\\.hpp|\\.\\./(kernel|link|pipeline)/"
  "kernel|ringpipe/(link|pipeline|plan|placement)\\.hpp|\\.\\./(link|pipeline)/"
  "link|ringpipe/(kernel|pipeline|plan|placement)\\.hpp|\\.\\./(kernel|pipeline)/"
  "pipeline|ringpipe/mpi/|\\.\\./(coord|mpi)/"
  "coord|ringpipe/mpi/|\\.\\./mpi/")
set(problems "")
foreach(rule IN LISTS rules)
  string(FIND "${rule}" "|" bar)
  string(SUBSTRING "${rule}" 0 ${bar} layer)
  math(EXPR start "${bar} + 1")
  string(SUBSTRING "${rule}" ${start} -1 forbidden)
  file(GLOB files "${ROOT}/src/${layer}/*")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" includes REGEX "^#include")
    foreach(line IN LISTS includes)
      if(line MATCHES "${forbidden}")
        string(APPEND problems "\n  src/${layer}/ includes a higher layer: ${f}: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
# Appends to `problems` each of `files` over `limit` lines, with `advice`.
function(check_lengths limit advice)
  foreach(f IN LISTS ARGN)
    file(READ "${f}" text)
    string(REGEX MATCHALL "\n" newlines "${text}")
    list(LENGTH newlines n)
    if(n GREATER ${limit})
      string(APPEND problems "\n  ${f} has ${n} lines (${advice})")
    endif()
  endforeach()
  set(problems "${problems}" PARENT_SCOPE)
endfunction()
file(GLOB_RECURSE library "${ROOT}/src/*" "${ROOT}/include/*" "${ROOT}/cl/*")
check_lengths(400 "at most 400" ${library})
# Prose pages are held to about 400 lines too: the journal and the architecture grow a page at a
# time (docs/performance/, docs/architecture/) instead of one page without end.
file(GLOB_RECURSE pages "${ROOT}/docs/*.md")
check_lengths(420 "a page holds at most 420: start another" ${pages} "${ROOT}/README.md")
if(problems)
  message(FATAL_ERROR "the tree breaks its rules:${problems}")
endif()
message(STATUS "tree rules hold")
