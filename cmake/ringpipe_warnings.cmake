# Warnings and sanitizers shared by every ringpipe target.
function(ringpipe_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
    # CLHPP's own headers ignore attributes on template arguments; that is not our code.
    -Wno-ignored-attributes)
  if(RINGPIPE_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(RINGPIPE_SANITIZERS)
  string(REPLACE ";" "," _rp_san "${RINGPIPE_SANITIZERS}")
  add_compile_options(-fsanitize=${_rp_san} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${_rp_san})
  if(_rp_san MATCHES "thread")
    # Asio's fenced blocks use std::atomic_thread_fence, which TSan does not model.
    add_compile_definitions(BOOST_ASIO_DISABLE_FENCED_BLOCK)
  endif()
endif()
