#!/usr/bin/env bash
# Regenerates docs/images/bench/*.png from the result files in bench/ (what docs/performance.md
# shows). Installs Debian's python3-matplotlib where it is missing. Extra arguments go to
# scripts/plot-bench.py (e.g. a result file of your own and --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "plots: installing python3-matplotlib"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-matplotlib </dev/null >/dev/null
fi
exec /usr/bin/python3 scripts/plot-bench.py "$@"
