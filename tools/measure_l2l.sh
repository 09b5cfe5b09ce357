#!/usr/bin/env bash
# L2L's device memory in depth: gpt-bench's widths (hidden 256, 8 heads, 128 tokens,
# vocab 2048) at 4, 8, 16, 32 and 64 blocks, batch 16 in u = 4 micro-batches on one
# rank, fp32, the stash on the host and on the device: the measured peak device bytes
# (axrun's counting allocator, 2 steps) beside the planner's prediction, and the host
# tier. Prints a Markdown table (MiB) for docs/performance.md.
#
#   tools/measure_l2l.sh [BUILD/tools]
set -eo pipefail
W=${1:-build/tools}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
echo "| blocks | stash | peak device, measured | predicted | predicted / measured | host tier, measured / predicted |"
echo "|---|---|---|---|---|---|"
for blocks in 4 8 16 32 64; do
  cat >"$D/model.json" <<JSON
{"name": "gpt-bench-$blocks", "family": "gpt", "num_layers": $blocks, "hidden": 256, "heads": 8, "seq_len": 128,
 "vocab": 2048, "ffn_multiplier": 4}
JSON
  for stash in host device; do
    $W/axplan plan --model "$D/model.json" --topology perlmutter --gpus 1 --batch-seqs 16 --precision fp32 \
      --strategy l2l --l2l-microbatches 4 --l2l-stash $stash -o "$D/p.json" >/dev/null
    mpirun --oversubscribe --allow-run-as-root -np 1 $W/axrun --plan "$D/p.json" --steps 2 --measure "$D/m.json" >/dev/null 2>&1
    python3 - "$D/m.json" $blocks $stash <<'PY'
import json, sys
M = 2**20
d = json.load(open(sys.argv[1]))["device_memory"]
peak, pred = d["peak_bytes"] / M, d["predicted_bytes_per_gpu"] / M
print(f"| {sys.argv[2]} | {sys.argv[3]} | {peak:.1f} | {pred:.1f} | {pred/peak:.3f} | "
      f"{d['host_peak_bytes']/M:.1f} / {d['predicted_host_bytes_per_gpu']/M:.1f} |")
PY
  done
done
