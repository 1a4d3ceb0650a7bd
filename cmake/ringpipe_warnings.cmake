# Warnings and sanitizers shared by every ringpipe target.
function(ringpipe_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
    # CLHPP's own headers ignore attributes on template arguments; that is not our code.
    -Wno-ignored-attributes)
  if(RINGPIPE_SANITIZERS)
    # GCC 12's -Wmaybe-uninitialized gives false positives inside libstdc++ (std::regex,
    # std::function) once sanitizer instrumentation changes inlining.
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
  endif()
  if(RINGPIPE_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(RINGPIPE_SANITIZERS)
  string(REPLACE ";" "," _rp_san "${RINGPIPE_SANITIZERS}")
  add_compile_options(-fsanitize=${_rp_san} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${_rp_san})
  # Line tables only: reports still name file and line. AddressSanitizer builds at -Og, which
  # compiles an instrumented test file in a fifth of the time -O2 -g takes (GCC 12: 79 s -> 16 s,
  # -O1 29 s); ThreadSanitizer's own slowdown is larger, so its builds keep -O1 (9 s).
  if(_rp_san MATCHES "address")
    add_compile_options(-Og -g1)
  else()
    add_compile_options(-O1 -g1)
  endif()
  if(_rp_san MATCHES "address" AND _rp_san MATCHES "undefined")
    # UBSan's null check instruments every reference binding and member access, which doubles the
    # compile time of template-heavy code; AddressSanitizer reports a null dereference itself.
    add_compile_options(-fno-sanitize=null)
  endif()
  if(_rp_san MATCHES "thread")
    # Asio's fenced blocks use std::atomic_thread_fence, which TSan does not model.
    add_compile_definitions(BOOST_ASIO_DISABLE_FENCED_BLOCK)
  endif()
endif()

# Sanitizer settings for every test of the calling directory: UBSan stops at the first report (so
# a report fails the test), LeakSanitizer skips leaks inside the OpenCL implementations, and the
# ICD loader sees every installed platform but Mesa's Clover: Clover has no devices here, and the
# gallium driver it loads and unloads at enumeration leaks from a module LeakSanitizer can no
# longer name (so no suppression can match it). TSan's lock-order checker is off: llvmpipe's JIT
# holds more locks at once than it can track (a CHECK failure inside the sanitizer).
# intercept_tls_get_addr=0: GCC 12's runtime (as up to GCC 13) takes a dynamic TLS block that
# happens to start 16 bytes into a page for a pre-2.25 glibc header and reads the words before it;
# with PoCL's and LLVM's dynamic TLS that made LeakSanitizer's tracer crash at exit ("Tracer
# caught signal 11") after a test had passed, now and then.
function(ringpipe_sanitize_tests)
  if(NOT RINGPIPE_SANITIZERS)
    return()
  endif()
  set(icd_dir "${PROJECT_BINARY_DIR}/sanitizer-icd")
  file(MAKE_DIRECTORY "${icd_dir}")
  file(GLOB icds /etc/OpenCL/vendors/*.icd)
  foreach(icd IN LISTS icds)
    file(READ "${icd}" library)
    if(NOT library MATCHES "libMesaOpenCL")
      file(COPY "${icd}" DESTINATION "${icd_dir}")
    endif()
  endforeach()
  get_property(tests DIRECTORY PROPERTY TESTS)
  set(env
    "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
    "ASAN_OPTIONS=intercept_tls_get_addr=0"
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizers/lsan.supp:print_suppressions=0:intercept_tls_get_addr=0"
    "TSAN_OPTIONS=halt_on_error=1:detect_deadlocks=0:suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizers/tsan.supp")
  foreach(test IN LISTS tests)
    get_property(test_env TEST ${test} PROPERTY ENVIRONMENT)
    if(NOT test_env MATCHES "OCL_ICD_VENDORS")
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT "OCL_ICD_VENDORS=${icd_dir}")
    endif()
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT ${env})
  endforeach()
endfunction()
