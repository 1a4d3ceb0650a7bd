#!/usr/bin/env bash
# Installs what is missing, builds ringpipe with warnings as errors, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${RINGPIPE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGPIPE_WARNINGS_AS_ERRORS=ON \
  ${RINGPIPE_SANITIZERS:+-DRINGPIPE_SANITIZERS=$RINGPIPE_SANITIZERS} >/dev/null
cmake --build "$build" -j2
ctest --test-dir "$build" -j2 --output-on-failure "$@"
