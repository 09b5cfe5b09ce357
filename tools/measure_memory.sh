#!/usr/bin/env bash
# Measured peak device memory beside the planner's prediction, per grid: gpt-bench,
# batch 16, fp32 plans (checkpointing and overlaps as `axplan plan` sets them), 3 steps
# of axrun on 1-8 ranks. Prints a Markdown table (MiB) for docs/performance.md.
#
#   tools/measure_memory.sh [BUILD/tools]
set -eo pipefail
W=${1:-build/tools}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
echo "| grid (gx,gy,gz,gdata,ginter) | measured peak | live after the step | predicted total | predicted model state | predicted activations | predicted gathered W + unscattered dW | predicted / measured peak |"
echo "|---|---|---|---|---|---|---|---|"
for spec in "1 1,1,1,1,1" "8 1,1,1,8,1" "8 8,1,1,1,1" "8 1,1,8,1,1" "8 2,2,2,1,1" "8 2,1,1,2,2" "4 1,1,1,1,4"; do
  set -- $spec; n=$1; g=$2; f=$D/p_${g//,/_}.json; m=$D/m_${g//,/_}.json
  $W/axplan plan --model gpt-bench --topology perlmutter --gpus $n --batch-seqs 16 --precision fp32 --grid $g -o $f >/dev/null
  $W/axplan rank --model gpt-bench --topology perlmutter --gpus $n --batch-seqs 16 --precision fp32 --top 0 --format json >$D/r.json
  mpirun --oversubscribe --allow-run-as-root -np $n $W/axrun --plan $f --steps 3 --measure $m >/dev/null 2>&1
  python3 - $m $g $D/r.json <<'PY'
import json, sys
M = 2**20
m = json.load(open(sys.argv[1])); d = m["device_memory"]
g = [int(x) for x in sys.argv[2].split(",")]
c = next(c for c in json.load(open(sys.argv[3]))["candidates"] if [c["gx"], c["gy"], c["gz"], c["gdata"], c["ginter"]] == g)
b = c["memory_breakdown_bytes"]
live = max(s["live_device_bytes"] for s in m["steps"]) / M
peak = d["peak_bytes"] / M; pred = c["memory_bytes_per_gpu"] / M
print(f"| {sys.argv[2]} | {peak:.1f} | {live:.1f} | {pred:.1f} | {b['model_state']/M:.1f} | {b['activations']/M:.1f} | "
      f"{(b['gathered_weights'] + b['unscattered_grads'])/M:.1f} | {pred/peak:.2f} |")
PY
done
