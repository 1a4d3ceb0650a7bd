#!/usr/bin/env bash
# Installs ringpipe's build and test dependencies from Debian's packages.
# Non-interactive; quick and harmless when everything is already there.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  opencl-headers ocl-icd-opencl-dev opencl-clhpp-headers clinfo
  pocl-opencl-icd mesa-opencl-icd oclgrind
  libboost-dev googletest libgtest-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  graphviz doxygen python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq </dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
