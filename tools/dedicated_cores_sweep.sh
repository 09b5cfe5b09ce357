#!/usr/bin/env bash
# Issue #16's emulated sweep on a machine with a core for every rank. On the 2-core
# development machine the emulated cluster's 8 ranks time-slice 2 cores, and
# docs/validation.md traces most of the model's error there (sync waits, a cost per
# call, tensor rings out of step, compute that moves with the load). This runs the same
# calibrate and `axplan validate --tensor-mode all` where that cause is absent: built for
# a lent GPU machine (16 cores; the GPU is not used). Not part of CI; docs/validation.md,
# "A core for every rank", gives what it printed.
#
# Usage: tools/dedicated_cores_sweep.sh [OUT_DIR]        (OUT_DIR: $OUT, else ./cores-sweep)
# Environment (defaults in brackets):
#   RATE [1gbit], NODES [2], GPN [4]   the emulated cluster (tools/emulated_cluster.sh)
#   STEPS [5], ROUNDS [6]              steps per configuration; calibrate's sync-wait rounds
#   REPEATS [1]                        runs of each configuration per sweep (validate --repeats)
#   KERNEL_PROBES [0]                  1: validate --kernel-probes (the kernels timed again before the
#                                      sweep and after each round; about 20-40 s each)
#   DEADLINE_S [560]                   a second sweep runs only if it can end before this
#   AXONN_BUILD                        a build with axplan, axplan-calibrate and axrun (no build)
#   PLANS                              a folder of plan files: instead of calibrate and the sweeps,
#                                      run each with `axrun --trace` (6 steps) and write
#                                      OUT_DIR/traces.json, each step's matmul spans per layer and
#                                      operation and its collectives' busy time, for each plan
#   IPROUTE                            a folder with bin/ip, bin/tc and their lib/, taken from
#                                      another machine, for a machine that has no iproute2
# Writes OUT_DIR/env.txt, probe.txt, calibrate.txt, topology.json, sweep1/ and sweep2/ (report.json,
# summary.md): at most 8 files, as a device call returns them.
set -uo pipefail
out=$(realpath -m "${1:-${OUT:-cores-sweep}}")  # from the caller's directory
cd "$(dirname "$0")/.."
mkdir -p "$out"
rate=${RATE:-1gbit} nodes=${NODES:-2} gpn=${GPN:-4} steps=${STEPS:-5} rounds=${ROUNDS:-6} repeats=${REPEATS:-1}
probes=()
[[ ${KERNEL_PROBES:-0} == 1 ]] && probes=(--kernel-probes)
deadline=${DEADLINE_S:-560}
logs=$(mktemp -d)  # the plans, traces and logs of every run; removed on exit
wrappers=""
trap 'rm -rf "$logs" ${wrappers:+"$wrappers"}' EXIT
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
say() { echo "[$(elapsed) s] $*" | tee -a "$out/env.txt"; }

{
  echo "cpus $(nproc), ranks $((nodes * gpn)), kernel $(uname -r)"
  mpirun --version | head -1
  # Python's torch, where the machine has one (the runs use the C++ LibTorch they were built with).
  python3 -c 'import torch; print("python torch", torch.__version__)' 2> /dev/null || echo "python torch: none"
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$out/env.txt"

if ! command -v ip > /dev/null || ! command -v tc > /dev/null; then
  [ -n "${IPROUTE:-}" ] || { say "no ip/tc on this machine and no IPROUTE"; exit 3; }
  # The carried programs load their own libraries through the loader's --library-path,
  # which (unlike LD_LIBRARY_PATH) the ranks that `ip netns exec` starts do not inherit.
  wrappers=$(mktemp -d)
  for tool in ip tc; do
    printf '#!/bin/sh\nexec /lib64/ld-linux-x86-64.so.2 --library-path %s %s "$@"\n' \
      "$(realpath "$IPROUTE/lib")" "$(realpath "$IPROUTE/bin/$tool")" > "$wrappers/$tool"
    chmod +x "$wrappers/$tool"
  done
  export PATH=$wrappers:$PATH
  say "ip and tc: carried from $IPROUTE"
fi
# The environment Open MPI runs in is recorded; if the emulated cluster does not start
# as it is (on the GPU machines, OMPI_MCA_plm=isolated stopped it until
# tools/emulated_cluster.sh named its launcher), it is tried with a clean environment.
{
  echo "== MPI-related environment"
  env | grep -E '^(OMPI|OPAL|ORTE|PMIX|SLURM|PBS|LSB|SGE|FLUX)' | sort
  echo "== parameter files"
  grep -hv '^#' /etc/openmpi/openmpi-mca-params.conf "$(dirname "$(readlink -f "$(command -v mpirun)")")/../etc/openmpi-mca-params.conf" \
    "$HOME/.openmpi/mca-params.conf" 2>/dev/null | grep .
} > "$out/probe.txt" 2>&1
emulated=()
for clean in no yes; do
  try=()
  [ $clean = yes ] && try+=(env -i "PATH=$PATH" "HOME=$HOME")
  try+=(bash tools/emulated_cluster.sh --nodes "$nodes" --gpus-per-node "$gpn" --rate "$rate" --)
  echo "== launch: ${try[*]}" >> "$out/probe.txt"
  if timeout 60 "${try[@]}" hostname >> "$out/probe.txt" 2>&1; then emulated=("${try[@]}"); break; fi
done
if (( ${#emulated[@]} == 0 )); then
  say "the emulated cluster does not start here (probe.txt)"
  exit 3
fi
say "emulated cluster: $nodes nodes x $gpn ranks at $rate, launched as: ${emulated[*]}"

build=${AXONN_BUILD:-}
if [ -z "$build" ]; then
  build=build-cores
  source tools/torch_wheel_configure.sh
  torch_wheel_configure "$build" "$logs" -DAXONN_BUILD_TESTS=OFF -DAXONN_BUILD_BENCHES=OFF -DAXONN_WITH_NCCL=OFF \
    | tee -a "$out/env.txt"
  (( PIPESTATUS[0] == 0 )) || exit 1
  targets=(axplan axplan-calibrate axrun)
  [ -n "${PLANS:-}" ] && targets=(axrun)
  if ! make -C "$build" -j"$(nproc)" "${targets[@]}" > "$logs/build.log" 2>&1; then
    grep -E "error|Error" "$logs/build.log" | head -40 | tee -a "$out/env.txt"
    exit 1
  fi
  say "built ${targets[*]}"
fi

if [ -n "${PLANS:-}" ]; then
  shopt -s nullglob
  plans=("$PLANS"/*.json)
  (( ${#plans[@]} )) || { say "no plan files in $PLANS"; exit 2; }
  for plan in "${plans[@]}"; do
    name=$(basename "$plan" .json)
    if ! timeout 60 "${emulated[@]}" "$build/tools/axrun" --plan "$plan" --steps 6 --progress poll \
      --measure "$logs/$name.measure.json" --trace "$logs/$name" > "$logs/$name.log" 2>&1; then
      say "$name: axrun failed: $(tail -1 "$logs/$name.log")"
      continue
    fi
    python3 tools/trace_summary.py "$out/traces.json" "$name" "$logs/$name.measure.json" "$logs/$name/rank0.json" \
      | tee -a "$out/env.txt"
  done
  exit 0
fi

"${emulated[@]}" "$build/tools/axplan" calibrate --gpus-per-node "$gpn" --model gpt-bench --batch-seqs 16 \
  --sync-wait-rounds "$rounds" --name "emulated-${nodes}x${gpn}-${rate}-dedicated-cores" -o "$out/topology.json" \
  > "$out/calibrate.txt" 2>&1 || { tail -20 "$out/calibrate.txt"; say "calibrate failed"; exit 1; }
say "calibrated: $(grep -E 'cores per rank|inter-node bandwidth' "$out/calibrate.txt" | tr '\n' ' ')"

sweep() {  # OUT_SUBDIR
  "$build/tools/axplan" validate --model gpt-bench --topology "$out/topology.json" --gpus $((nodes * gpn)) \
    --batch-seqs 16 --steps "$steps" --repeats "$repeats" --overlap-level 0 --axrun-args "--progress poll" --tensor-mode all \
    "${probes[@]}" --timeout 60 --out-dir "$logs/$1" --launcher "${emulated[*]}" > "$logs/$1.txt" 2>&1
  local rc=$?
  grep -E "^\| (batch-time MAPE|Spearman|top-5|predicted rank of the measured best) " "$logs/$1/summary.md" \
    | head -4 | tee -a "$out/env.txt"
  # The per-run plans and traces stay behind (a device call returns 8 files); the plots
  # are drawn again from report.json by `axplan validate --rescore`.
  mkdir -p "$out/$1" && cp "$logs/$1/report.json" "$logs/$1/summary.md" "$out/$1/"
  return $rc
}
start=$(elapsed)
sweep sweep1 || say "sweep 1 ended with an error"
took=$(($(elapsed) - start))
say "sweep 1 took $took s"
if (( $(elapsed) + took + 15 < deadline )); then
  sweep sweep2 || say "sweep 2 ended with an error"
  say "sweep 2 done"
else
  say "no time for a second sweep before ${deadline} s"
fi
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/env.txt"
