#!/usr/bin/env bash
# ringpipe on a machine with an NVIDIA GPU, no Debian packages and no network (the lent GPU
# machine): build here, carry the binaries, run there.
#   scripts/gpu-run.sh bundle     here: builds, then packs into .gpu/ the stripped tools, tests and
#                                 examples, the libraries they need beyond glibc and libstdc++, and
#                                 Debian's ICD loader (ocl-icd-libopencl1, downloaded as a .deb)
#   scripts/gpu-run.sh run OUT    there, in the repository root with .gpu/ in it: unpacks, points an
#                                 ICD file at the driver's libnvidia-opencl.so.1, then runs
#                                 ringpipe-info, ringpipe-litmus, the one-device ringpipe-bench
#                                 topics, the busy host cores, and the test suite with the GPU as
#                                 device under test, until GPU_RUN_SECONDS (540) have passed.
#                                 Results in OUT: summary.log, info.json, litmus.json, bench.json,
#                                 targets.md (bench-targets.py of bench.json, where python3 is),
#                                 tests.tar.gz (one log per test, each run alone). GPU_RUN_STEPS
#                                 picks steps (default "info litmus bench demo tests");
#                                 GPU_RUN_ICD_LIB names another driver library (to try the
#                                 script with PoCL's). GPU_RUN_TESTS (a regex) picks test programs.
#   GPU_BASE_BENCH=PATH scripts/gpu-run.sh bundle
#                                 also carries another build's ringpipe-bench (say, the commit
#                                 before a change); the step "ab" then runs it and this build's,
#                                 alternated GPU_RUN_AB_ROUNDS (2) times over GPU_RUN_AB_FILTER:
#                                 OUT/ab-base-N.json, OUT/ab-new-N.json
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bundle() {
  local build=${BUILD_DIR:-build} stage=.gpu/stage
  cmake --build "$build" -j2 || exit 1
  rm -rf .gpu && mkdir -p "$stage/bin" "$stage/lib"
  local f
  for f in "$build"/tools/ringpipe-* "$build"/tests/* "$build"/examples/*; do
    [[ -f $f && -x $f ]] && file -b "$f" | grep -q ELF && strip -o "$stage/bin/$(basename "$f")" "$f"
  done
  [[ -n ${GPU_BASE_BENCH:-} ]] && { strip -o "$stage/bin/ringpipe-bench-base" "$GPU_BASE_BENCH" || exit 1; }
  # glibc, libstdc++ and libgcc_s are newer there; libOpenCL.so.1 comes from the .deb below.
  ldd "$stage"/bin/* 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*|libOpenCL)\.so' |
    xargs -r cp -L -t "$stage/lib"
  (cd .gpu && apt-get download ocl-icd-libopencl1 2>/dev/null) || { echo "gpu-run: apt-get download failed" >&2; exit 1; }
  pwd > .gpu/source_dir # tests find their files under the path they were built in
  tar -C .gpu -cJf .gpu/bundle.tar.xz stage && rm -rf "$stage"
  du -sh .gpu/*
}

# Busy host cores, averaged over a command's run (from /proc/stat; the machine is otherwise idle).
busy_cores() {
  local a b
  read -ra a < <(head -1 /proc/stat)
  "$@"
  local rc=$?
  read -ra b < <(head -1 /proc/stat)
  awk -v n="$(nproc)" -v a="${a[*]}" -v b="${b[*]}" 'BEGIN {
    split(a, x, " "); split(b, y, " "); t = 0; idle = (y[5] - x[5]) + (y[6] - x[6]);
    for (i = 2; i <= 11; ++i) t += y[i] - x[i];
    printf "busy host cores: %.2f of %d\n", (t - idle) / t * n, n }'
  return $rc
}

run() {
  local out=${1:?usage: gpu-run.sh run OUT}
  local root=/tmp/ringpipe-gpu
  mkdir -p "$out" && exec > >(tee -a "$out/summary.log") 2>&1
  export DEADLINE=$(($(date +%s) + ${GPU_RUN_SECONDS:-540}))
  rm -rf "$root" && mkdir -p "$root/icd" "$root/logs"
  tar -C "$root" -xJf .gpu/bundle.tar.xz || exit 1
  if command -v dpkg > /dev/null; then
    dpkg -x .gpu/ocl-icd-libopencl1_*.deb "$root/ocl" || exit 1
  else # a .deb is an ar archive holding data.tar.*
    python3 - .gpu/ocl-icd-libopencl1_*.deb "$root/ocl" << 'EOF' || exit 1
import io, sys, tarfile
d = open(sys.argv[1], 'rb').read(); i = 8
while i < len(d):
    name, size = d[i:i + 16].strip().decode(), int(d[i + 48:i + 58]); i += 60
    if name.startswith('data.tar'): tarfile.open(fileobj=io.BytesIO(d[i:i + size])).extractall(sys.argv[2])
    i += size + size % 2
EOF
  fi
  local src lib
  src=$(cat .gpu/source_dir)
  [[ -e $src ]] || { mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; }
  local d # tests run tools and helpers from the build tree they were built in
  for d in tests tools examples; do
    [[ -e $src/build/$d ]] || { mkdir -p "$src/build" && ln -s "$root/stage/bin" "$src/build/$d"; }
  done
  lib=${GPU_RUN_ICD_LIB:-$(ldconfig -p | awk '/libnvidia-opencl\.so\.1/ {print $NF; exit}')}
  [[ -n $lib ]] || lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 /lib /opt -name 'libnvidia-opencl.so.1*' 2>/dev/null | head -1)
  if [[ -z $lib ]]; then
    echo "gpu-run: no libnvidia-opencl.so.1 on this machine; what the driver installed:"
    ldconfig -p | grep -i nvidia; ls /usr/local/nvidia/lib* /etc/OpenCL/vendors 2>&1
    exit 1
  fi
  local icd
  for icd in /etc/OpenCL/vendors/*.icd; do [[ -e $icd ]] && echo "installed ICD file: $icd"; done
  echo "driver library: $lib"
  echo "$lib" > "$root/icd/nvidia.icd"
  export OCL_ICD_VENDORS=$root/icd
  LD_LIBRARY_PATH=$root/stage/lib:$root/ocl/usr/lib/x86_64-linux-gnu:$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
  export RINGPIPE_DEVICE_FILTER=${RINGPIPE_DEVICE_FILTER:-NVIDIA}
  export PATH=$root/stage/bin:$PATH
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | sed 's/^/nvidia-smi: /'
  echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

  step() { # step NAME SECONDS COMMAND...: runs it for at most SECONDS, never past the deadline
    local name=$1 limit=$2 left
    shift 2
    left=$((DEADLINE - $(date +%s) - 5))
    ((left < limit)) && limit=$left
    ((limit > 0)) || { echo "== $name: not run (out of time)"; return; }
    echo "== $name (at most $limit s): $*"
    timeout -k 5 "$limit" bash -c '"$@"' _ "$@" # bash: the exported functions too
    echo "== $name: rc $?"
  }
  local steps=" ${GPU_RUN_STEPS:-info litmus bench demo tests} "
  [[ $steps == *" info "* ]] && step info 30 ringpipe-info && step info.json 30 sh -c "ringpipe-info --json > '$out/info.json'"
  [[ $steps == *" litmus "* ]] && step litmus 150 ringpipe-litmus --messages "${LITMUS_MESSAGES:-1000000}" --json "$out/litmus.json"
  [[ $steps == *" bench "* ]] && step bench 150 busy_cores ringpipe-bench --quick --json "$out/bench.json" \
    --filter 'host_to_kernel|spsc_baseline|kernel_to_kernel|pipeline_latency|asio_baseline|versus|barrier|links|collectives'
  if [[ $steps == *" ab "* && -x $root/stage/bin/ringpipe-bench-base ]]; then
    local round filter=${GPU_RUN_AB_FILTER:-host_to_kernel|versus|pipeline_latency|kernel_to_kernel}
    for ((round = 1; round <= ${GPU_RUN_AB_ROUNDS:-2}; ++round)); do
      step "ab base $round" 150 ringpipe-bench-base --quick --json "$out/ab-base-$round.json" --filter "$filter"
      step "ab new $round" 150 ringpipe-bench --quick --json "$out/ab-new-$round.json" --filter "$filter"
    done
  fi
  # Where the machine has Python: the open issues' targets as the bench just measured them.
  [[ $steps == *" bench "* && -s $out/bench.json ]] && command -v python3 > /dev/null &&
    step targets 20 sh -c "python3 scripts/bench-targets.py '$out/bench.json' | tee '$out/targets.md'"
  [[ $steps == *" demo "* ]] && step demo 30 busy_cores producer_consumer
  [[ $steps == *" tests "* ]] && step tests 240 run_tests "$root" && tar -C "$root/logs" -czf "$out/tests.tar.gz" .
}

# Every test of every test program but the MPI ones, each in a process of its own (a GPU kernel
# that never returns holds up every later launch of its process), eight at a time, each until the
# deadline at most. Prints the tests that did not pass and the counts.
run_tests() {
  local root=$1 b
  # shellcheck disable=SC2317 # called through xargs
  one_test() {
    local b=$1 test=$2 log left rc
    log=$ROOT/logs/$(basename "$b").${test//\//_}.log
    left=$((DEADLINE - $(date +%s) - 8))
    ((left > 0)) || { echo "$(basename "$b") $test: not run (out of time)"; return; }
    ((left > 60)) && left=60
    timeout -k 3 "$left" "$b" --gtest_color=no --gtest_filter="$test" > "$log" 2>&1
    rc=$?
    if grep -q '^\[       OK \]' "$log"; then echo "ok $(basename "$b") $test"
    elif grep -q '^\[  SKIPPED \]' "$log"; then echo "skipped $(basename "$b") $test: $(grep -m1 -A1 'Skipped$' "$log" | tail -1)"
    else echo "FAILED (rc $rc) $(basename "$b") $test"; fi
  }
  export -f one_test
  export ROOT=$root
  # shellcheck disable=SC2016 # $0 and $1 are the bash's that xargs starts
  for b in "$root"/stage/bin/*_test; do
    [[ $b =~ /(mpi_[a-z_]*|cross_rank|link_engine)_test$ ]] && continue # need mpirun
    [[ $(basename "$b") =~ ${GPU_RUN_TESTS:-.} ]] || continue
    "$b" --gtest_list_tests | awk -v b="$b" '/^[^ ]/ {suite = $1} /^  / {print b, suite $1}'
  done | xargs -P 8 -L 1 bash -c 'one_test "$0" "$1"' > "$root/logs/results.txt"
  grep -v '^ok ' "$root/logs/results.txt" | sort
  echo "tests: $(grep -c '^ok ' "$root/logs/results.txt") passed, $(grep -c '^skipped ' "$root/logs/results.txt") skipped," \
    "$(grep -c '^FAILED ' "$root/logs/results.txt") failed, $(grep -c 'not run' "$root/logs/results.txt") not run"
}
export -f busy_cores run_tests

case ${1:-} in
bundle) bundle ;;
run) shift && run "$@" ;;
*) sed -n '2,22p' "$0" && exit 2 ;;
esac
