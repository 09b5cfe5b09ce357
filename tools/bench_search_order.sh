#!/usr/bin/env bash
# --search-order on the emulated cluster (issue #16): the plan the planner writes with
# the placement order fixed (--order's default, x,y,z,pipe,data) against the one it
# writes with --search-order, each trained by axrun on the same emulated cluster
# (tools/emulated_cluster.sh: network namespaces, tc-limited links), the two taking
# turns. Two pairs: the best candidate of each ranking, and GRID in each order.
# Prints the predicted and the measured batch time (median over every round of the
# steps after the first) and searched / fixed for both. Needs root; a few minutes.
#
#   tools/bench_search_order.sh TOPOLOGY [BUILD_DIR] [NODES] [GPUS_PER_NODE] [RATE] [GRID] [MODEL] [SEQS] [ROUNDS]
#   (defaults: build 2 4 200mbit 1,1,1,4,2 gpt-bench 16 3; TOPOLOGY: axplan calibrate's file for that cluster)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export AXONN_TOOLS=$root/tools  # tools/plan_mesh.py, for the Python below
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
topology=$(realpath "$1")
build=$(cd "${2:-$root/build}" && pwd)
nodes=${3:-2} gpn=${4:-4} rate=${5:-200mbit} grid=${6:-1,1,1,4,2} model=${7:-gpt-bench} seqs=${8:-16} rounds=${9:-3}
gpus=$((nodes * gpn))
for p in axplan axrun; do [ -x "$build/tools/$p" ] || { echo "bench_search_order.sh: $build/tools/$p not built" >&2; exit 2; }; done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# fp32 (the runtime's dtype on CPU), every overlap switch off and MPI progress by polling:
# as axplan validate runs on this machine (docs/validation.md says why).
common=(--model "$model" --topology "$topology" --gpus "$gpus" --batch-seqs "$seqs" --precision fp32 --overlap-level 0)
"$build/tools/axplan" plan "${common[@]}" --output "$work/best_fixed.json" >/dev/null
"$build/tools/axplan" plan "${common[@]}" --search-order --output "$work/best_searched.json" >/dev/null
"$build/tools/axplan" plan "${common[@]}" --grid "$grid" --output "$work/grid_fixed.json" >/dev/null
"$build/tools/axplan" plan "${common[@]}" --grid "$grid" --search-order --output "$work/grid_searched.json" >/dev/null

for ((r = 1; r <= rounds; r++)); do
  for p in best_fixed best_searched grid_fixed grid_searched; do
    echo "round $r/$rounds: $p" >&2
    bash "$root/tools/emulated_cluster.sh" --nodes "$nodes" --gpus-per-node "$gpn" --rate "$rate" -- \
      "$build/tools/axrun" --plan "$work/$p.json" --steps 6 --log-every 6 --progress poll --measure "$work/$p.$r.measure.json" >/dev/null
  done
done

python3 - "$work" "$rounds" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, os.environ["AXONN_TOOLS"])
import plan_mesh
work, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for p in ["best_fixed", "best_searched", "grid_fixed", "grid_searched"]:
    plan = json.load(open(f"{work}/{p}.json"))
    times = [s["batch_s"] for r in range(1, rounds + 1)
             for s in json.load(open(f"{work}/{p}.{r}.measure.json"))["steps"][1:]]
    g = plan_mesh.grid(plan)
    rows[p] = dict(grid=",".join(str(g[k]) for k in ["gx", "gy", "gz", "gdata", "ginter"]),
                   order=",".join(plan_mesh.order(plan)), predicted=plan["prediction"]["batch_s"],
                   measured=statistics.median(times), lo=min(times), hi=max(times), n=len(times))
print("| plan | grid | placement order | predicted (s) | measured median (s) | range (s) | steps |")
print("|---|---|---|---|---|---|---|")
for p, r in rows.items():
    print(f"| {p.replace('_', ', ')} | {r['grid']} | {r['order']} | {r['predicted']:.3f} | {r['measured']:.3f} | "
          f"{r['lo']:.3f}-{r['hi']:.3f} | {r['n']} |")
for what in ["best", "grid"]:
    f, s = rows[f"{what}_fixed"], rows[f"{what}_searched"]
    print(f"{what}: searched / fixed = {s['measured'] / f['measured']:.3f} measured, "
          f"{s['predicted'] / f['predicted']:.3f} predicted")
PY
