#!/usr/bin/env bash
# Installs what is missing, builds ringpipe, and runs the main demo on two PoCL devices.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${RINGPIPE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2
# Two PoCL devices in one platform: the producer runs on one, the consumer on the other.
POCL_DEVICES="pthread pthread" RUSTICL_ENABLE= "$build/examples/producer_consumer" "$@"
