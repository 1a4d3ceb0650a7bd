#!/usr/bin/env bash
# Installs what is missing, builds ringpipe with warnings as errors, and runs the whole test suite.
#   scripts/test.sh [--sanitizers] [ctest arguments...]
# --sanitizers (what CI runs) then also builds and runs the suite with AddressSanitizer and
# UndefinedBehaviorSanitizer, and the host-side concurrency tests with ThreadSanitizer, each in its own
# build folder. Any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizers=0
if [[ ${1:-} == --sanitizers ]]; then
  sanitizers=1
  shift
fi
./scripts/install-deps.sh
build=${RINGPIPE_BUILD_DIR:-build}

configure_build_test() { # folder, sanitizers, extra cmake options, targets (all if empty), then ctest arguments
  local dir=$1 san=$2 extra=$3 targets=$4
  shift 4
  # Line tables only (-g1): a failure's backtrace keeps file and line, and the build takes about
  # 40% less time than with full debug information. The sanitizer builds choose their own level
  # (cmake/ringpipe_warnings.cmake).
  # shellcheck disable=SC2086 # $extra holds several options
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGPIPE_WARNINGS_AS_ERRORS=ON \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" ${san:+-DRINGPIPE_SANITIZERS=$san} $extra >/dev/null
  # shellcheck disable=SC2086 # $targets holds several target names
  cmake --build "$dir" -j2 ${targets:+--target $targets}
  ctest --test-dir "$dir" -j2 --output-on-failure "$@"
}

configure_build_test "$build" "${RINGPIPE_SANITIZERS:-}" "" "" "$@"
if ((sanitizers)); then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
  # oclgrind preloads its own OpenCL runtime, and the install test builds an uninstrumented
  # project against the library: both only run in the plain build; so do the MPI tests (Open
  # MPI's allocations at exit read as leaks), so this build leaves the MPI component out, and
  # ringpipe-bench (instrumented, its numbers mean nothing).
  configure_build_test "$build-asan" address,undefined "-DRINGPIPE_WITH_MPI=OFF -DRINGPIPE_BUILD_BENCH=OFF" "" \
    -E "oclgrind|install" "$@"
  echo "== ThreadSanitizer (host-side concurrency tests)"
  # Left out: kernel.* (their concurrency is between host threads and kernels ThreadSanitizer
  # does not instrument; the pipeline tests run the same proxies' host side) and
  # pipeline.pocl_rusticl (rusticl and llvmpipe's LLVM JIT synchronise their threads in code
  # ThreadSanitizer does not see, so it reports races inside them). Without precompiled headers:
  # the library's files and these tests compiled on their own includes, so one that forgets an
  # include fails here.
  configure_build_test "$build-tsan" thread \
    "-DRINGPIPE_BUILD_EXAMPLES=OFF -DRINGPIPE_BUILD_TOOLS=OFF -DRINGPIPE_PRECOMPILED_HEADERS=OFF" \
    concurrency_tests -L concurrency -E "^kernel[.]|rusticl" "$@"
fi
