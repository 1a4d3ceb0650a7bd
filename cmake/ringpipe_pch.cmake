# Precompiled headers: CLHPP, Asio, the standard library and ringpipe's pipeline headers are parsed
# once per kind of target instead of once per file, which is most of the work in compiling one of
# ringpipe's files (a test file 5.8-12.3 s -> 3.1-7.8 s on GCC 12). One header set per kind, as
# targets whose flags differ cannot share one: the library (position-independent code), the test
# binaries (GoogleTest's definitions) and the programs (examples and tools;
# ringpipe-bench is left out, tools/CMakeLists.txt says why).
# Off, every file is compiled on its own includes: scripts/test.sh turns them off in its
# ThreadSanitizer build, so that a file that forgets an include still fails a build of CI.
option(RINGPIPE_PRECOMPILED_HEADERS "Precompile the headers most files include" ON)

set(RINGPIPE_PCH_HEADERS
  <algorithm> <atomic> <chrono> <functional> <map> <memory> <mutex> <optional> <string> <thread> <vector>
  <CL/opencl.hpp> <boost/asio/io_context.hpp> <boost/asio/post.hpp> <boost/asio/steady_timer.hpp>
  <boost/asio/strand.hpp> <ringpipe/runtime.hpp> <ringpipe/pipeline.hpp>)

# ringpipe_precompile_headers(target KIND): KIND is library, test or program. The first target of
# each kind precompiles the headers; the others of that kind reuse its result.
function(ringpipe_precompile_headers target kind)
  if(NOT RINGPIPE_PRECOMPILED_HEADERS)
    return()
  endif()
  get_property(owner GLOBAL PROPERTY RINGPIPE_PCH_OWNER_${kind})
  if(owner)
    target_precompile_headers(${target} REUSE_FROM ${owner})
    return()
  endif()
  set(headers ${RINGPIPE_PCH_HEADERS})
  if(kind STREQUAL "test")
    list(APPEND headers <gtest/gtest.h>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
  set_property(GLOBAL PROPERTY RINGPIPE_PCH_OWNER_${kind} ${target})
endfunction()
