#!/usr/bin/env bash
# The tensor-mode benchmark of issue #11: a training step of each tensor mode on 4 and on
# 8 ranks, on one rate-limited network, as ratios to 1d beside the planner's predicted
# ratios. The network is a namespace whose loopback tc limits to RATE
# (tools/limited_network.sh), every rank talking TCP over it. For each rank count,
# `axplan calibrate` measures it first on those ranks (as 2 "nodes" on the same link:
# calibrate needs a ring across nodes), and bench_tensor_modes predicts with that topology.
# Needs root (ip netns, tc). Takes a few minutes on 2 cores.
#
#   tools/bench_tensor_modes.sh [BUILD_DIR] [RATE] [MODEL] [SEQS]     (defaults: build 400mbit gpt-bench 8)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) rate=${2:-400mbit} model=${3:-gpt-bench} seqs=${4:-8}
for p in axplan axplan-calibrate bench_tensor_modes; do
  [ -x "$build/tools/$p" ] || { echo "bench_tensor_modes.sh: $build/tools/$p not built; expected a build (cmake --build $build; the benchmarks: --target benches)" >&2; exit 2; }
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mpi="mpirun --oversubscribe --allow-run-as-root --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
bash "$root/tools/limited_network.sh" "$rate" bash -c "
  set -e
  for n in 4 8; do
    echo; echo \"== \$n ranks: axplan calibrate (2 nodes of \$((n / 2)) on the same link), then the modes\"
    $mpi -np \$n '$build/tools/axplan' calibrate --gpus-per-node \$((n / 2)) --model '$model' --batch-seqs $seqs \\
      -o '$work/cal'\$n.json | tail -3
    $mpi -np \$n '$build/tools/bench_tensor_modes' --topology '$work/cal'\$n.json --model '$model' --seqs $seqs
  done"
