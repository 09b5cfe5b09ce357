#!/usr/bin/env bash
# How a waiting rank passes the time (axrun --wait, runtime/idle_wait.hpp): a training
# step of each grid under `--wait yield` and `--wait sleep`, on the emulated cluster
# (tools/emulated_cluster.sh: network namespaces joined by tc-limited links), the two
# policies taking turns run by run so that both see the same machine. Prints each run's
# median step (steps 2 on; the first is a warm-up) and, per grid, the median over the
# rounds of each policy and their ratio, sleep / yield, from this one run. Needs root
# (ip netns, tc). Not part of CI: about 45 s per run of gpt-bench on 2 cores.
#
#   tools/bench_wait_policy.sh [BUILD_DIR] [TOPOLOGY]
# TOPOLOGY (the plans' topology; their grids, not their predictions, matter here):
#   default docs/validation/emulated-4x2-200mbit-2026-11-29-lent-cores-topology.json
# Environment (defaults in brackets):
#   NODES [4], GPN [2], RATE [200mbit]   the emulated cluster
#   GRIDS ["1,1,1,2,4 2,1,1,1,4 1,1,8,1,1 2d-broadcast:4,1,2"]   each gx,gy,gz,gdata,ginter, or
#                                      MODE:GRID for axplan plan --tensor-mode MODE --grid GRID
#   ROUNDS [3], STEPS [6], MODEL [gpt-bench], SEQS [16]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
topology=${2:-$root/docs/validation/emulated-4x2-200mbit-2026-11-29-lent-cores-topology.json}
nodes=${NODES:-4} gpn=${GPN:-2} rate=${RATE:-200mbit} rounds=${ROUNDS:-3} steps=${STEPS:-6}
model=${MODEL:-gpt-bench} seqs=${SEQS:-16}
grids=${GRIDS:-"1,1,1,2,4 2,1,1,1,4 1,1,8,1,1 2d-broadcast:4,1,2"}
for p in axplan axrun; do
  [ -x "$build/tools/$p" ] || { echo "bench_wait_policy.sh: $build/tools/$p not built; expected a build with LibTorch and MPI" >&2; exit 2; }
done
[ -f "$topology" ] || { echo "bench_wait_policy.sh: topology $topology not found; expected a topology file (axplan calibrate)" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
launch=(bash "$root/tools/emulated_cluster.sh" --nodes "$nodes" --gpus-per-node "$gpn" --rate "$rate" --)
for g in $grids; do
  mode=(); [[ $g == *:* ]] && mode=(--tensor-mode "${g%%:*}")
  "$build/tools/axplan" plan --model "$model" --topology "$topology" --gpus $((nodes * gpn)) --batch-seqs "$seqs" \
    --precision fp32 --overlap-level 0 "${mode[@]}" --grid "${g##*:}" -o "$work/$g.plan.json" >/dev/null
done
echo "$nodes nodes x $gpn ranks, $rate; $model, $seqs sequences, fp32, overlap level 0, --progress poll; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; ++r)); do
  for g in $grids; do
    for w in yield sleep; do
      m="$work/$g.$w.$r.json"
      timeout 600 "${launch[@]}" "$build/tools/axrun" --plan "$work/$g.plan.json" --steps "$steps" --measure "$m" \
        --progress poll --wait "$w" >"$work/log" 2>&1 </dev/null || { echo "run $g --wait $w failed:"; tail -5 "$work/log"; exit 1; }
      python3 - "$m" "$g" "$w" "$r" <<'PY'
import json, statistics, sys
m, g, w, r = sys.argv[1:]
s = [x["batch_s"] for x in json.load(open(m))["steps"]][1:]
print(f"round {r} grid {g} --wait {w:5} steps " + " ".join(f"{v:.3f}" for v in s) + f"  median {statistics.median(s):.3f} s")
PY
    done
  done
done
python3 - "$work" $grids <<'PY'
import glob, json, statistics, sys
work, grids = sys.argv[1], sys.argv[2:]
def medians(g, w):
    return [statistics.median([x["batch_s"] for x in json.load(open(f))["steps"]][1:])
            for f in sorted(glob.glob(f"{work}/{g}.{w}.*.json"))]
print("\n| grid (gx,gy,gz,gdata,ginter; MODE: its tensor mode) | yield: median step (s), rounds' range | sleep: median step (s), rounds' range | sleep / yield |")
print("|---|---|---|---|")
for g in grids:
    y, s = medians(g, "yield"), medians(g, "sleep")
    print(f"| {g} | {statistics.median(y):.3f} ({min(y):.3f}-{max(y):.3f}) | {statistics.median(s):.3f} "
          f"({min(s):.3f}-{max(s):.3f}) | **{statistics.median(s) / statistics.median(y):.2f}** |")
PY
