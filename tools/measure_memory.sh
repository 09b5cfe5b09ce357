#!/usr/bin/env bash
# Measured peak device memory beside the planner's prediction, per grid: gpt-bench,
# batch 16, fp32 plans (checkpointing and overlaps as `axplan plan` sets them), 3 steps
# of axrun on 1-8 ranks, and the three pipeline schedules on 4 stages. Prints a
# Markdown table (MiB) for docs/performance.md.
# A second table: the optimizer on the device against the offloaded one (several bsize)
# and ZeRO-1 and ZeRO-2 (alone and offloaded) for gpt-bench and a 12-block gpt-bench, on 1 rank
# and 2 and 4 data-parallel ranks: the
# model state measured (live device bytes after the step) and predicted, and the host
# tier. A third: the same in mixed precision (bf16 weights; bf16 gradients as AxoNN
# 2022, and fp32 gradients as Megatron-LM) on 1 and 4 data-parallel ranks, ZeRO-3 included.
# A fourth: each tensor mode (1d, AxoNN's 3D, 2d, 2.5d, both in SUMMA's broadcast form too, 3d,
# sequence) on 4 and 8 ranks,
# measured and predicted, each also as a ratio to 1d on as many ranks (issue #11).
#
#   tools/measure_memory.sh [BUILD/tools] [1|2|3|4|all]     (which tables; default all)
set -eo pipefail
W=${1:-build/tools}
export AXONN_TOOLS=$(cd "$(dirname "$0")" && pwd)  # tools/plan_mesh.py, for the Python below
TABLES=${2:-all}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT

# measure TABLE MODEL RANKS GRID [PLANNER FLAGS...]: plans, ranks and runs one
# configuration, then prints its row of table 1 (grids) or 2 and 3 (optimizers).
# PRECISION: the planner's precision flags (default fp32).
PRECISION=${PRECISION:---precision fp32}
measure() {
  local table=$1 model=$2 n=$3 g=$4; shift 4
  local precision
  read -r -a precision <<<"$PRECISION"
  $W/axplan plan --model "$model" --topology perlmutter --gpus $n --batch-seqs 16 "${precision[@]}" --grid $g "$@" \
    -o $D/p.json >/dev/null
  $W/axplan rank --model "$model" --topology perlmutter --gpus $n --batch-seqs 16 "${precision[@]}" "$@" --top 0 \
    --format json >$D/r.json
  mpirun --oversubscribe --allow-run-as-root -np $n $W/axrun --plan $D/p.json --steps 3 --measure $D/m.json >/dev/null 2>&1
  python3 - $table $D/m.json $g $D/r.json "$(basename "$model" .json)" "$*" "$PRECISION" $D/p.json $D/modes.jsonl <<'PY'
import json, os, sys
sys.path.insert(0, os.environ["AXONN_TOOLS"])
import plan_mesh
M = 2**20
table, measured, grid, ranking, model, flags, precision, plan, modes = sys.argv[1:10]
if table == "3":
    model += ", bf16 gradients" if "--grad-precision bf16" in precision else ", fp32 gradients"
m = json.load(open(measured)); d = m["device_memory"]
pg = plan_mesh.grid(json.load(open(plan)))  # the plan's grid, sequence group and layout included
keys = ("gx", "gy", "gz", "gdata", "ginter", "sequence", "layout")
c = next(c for c in json.load(open(ranking))["candidates"] if all(c.get(k) == pg.get(k) for k in keys))
b = c["memory_breakdown_bytes"]
live = max(s["live_device_bytes"] for s in m["steps"]) / M
peak = d["peak_bytes"] / M; pred = c["memory_bytes_per_gpu"] / M; state = b["model_state"] / M
if table == "4":
    with open(modes, "a") as f:
        f.write(json.dumps({"ranks": pg["gx"] * pg["gy"] * pg["gz"] * pg["gdata"] * pg["ginter"], "mode": flags,
                            "grid": ",".join(str(pg[k]) for k in keys[:5]), "peak": peak, "live": live, "pred": pred,
                            "state": state, "act": b["activations"] / M,
                            "gathered": (b["gathered_weights"] + b["unscattered_grads"]) / M}) + "\n")
elif table == "1":
    opt = flags.split()
    if "--pipeline-schedule" in opt:
        grid += f" {opt[opt.index('--pipeline-schedule') + 1]}, micro-batch {opt[opt.index('--microbatch-seqs') + 1]}"
    print(f"| {grid} | {peak:.1f} | {live:.1f} | {pred:.1f} | {state:.1f} | {b['activations']/M:.1f} | "
          f"{b['bucket_buffers']/M:.1f} | {(b['gathered_weights'] + b['unscattered_grads'])/M:.1f} | "
          f"{b['optimizer_phase']/M:.1f} | {pred/peak:.2f} |")
else:
    offload = "--offload-optimizer" in flags
    opt = flags.split()
    zero = f"ZeRO-{opt[opt.index('--zero') + 1]}" if "--zero" in opt else ""
    name = zero + (" + " if zero and offload else "")
    name = (name + (f"offload, bsize {opt[opt.index('--bucket-elements') + 1]}" if offload else "")) or "device Adam"
    host = f"{d['host_peak_bytes']/M:.1f} / {c.get('host_memory_bytes_per_gpu', 0)/M:.1f}" if offload else "-"
    print(f"| {model} | {grid} | {name} | {live:.1f} | {state:.1f} | {state/live:.2f} | {peak:.1f} | {pred:.1f} | "
          f"{pred/peak:.2f} | {host} |")
PY
}

if [ "$TABLES" = 1 ] || [ "$TABLES" = all ]; then
echo "| grid (gx,gy,gz,gdata,ginter) | measured peak | live after the step | predicted total | predicted model state | predicted activations | predicted data-parallel buckets | predicted gathered W + unscattered dW | predicted optimizer phase (in place of the passes' parts) | predicted / measured peak |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for spec in "1 1,1,1,1,1" "8 1,1,1,8,1" "8 8,1,1,1,1" "8 1,1,8,1,1" "8 2,2,2,1,1" "8 2,1,1,2,2" "4 1,1,1,1,4"; do
  measure 1 gpt-bench $spec
done
# The three pipeline schedules on 4 stages, 16 and 8 micro-batches: gpipe keeps every
# micro-batch's activations (and, on the last stage, its loss's graph) until its backward.
for schedule in gpipe 1f1b message-driven; do
  for mb in 1 2; do measure 1 gpt-bench 4 1,1,1,1,4 --pipeline-schedule $schedule --microbatch-seqs $mb; done
done
fi
[ "$TABLES" = 1 ] && exit 0

# Each tensor mode, gpt-bench, batch 16, fp32 (Colossal-AI's memory experiment compared
# 1D, 2D and 2.5D on 4 GPUs and 1D, 2.5D (d = 2) and 3D on 8).
if [ "$TABLES" = 4 ] || [ "$TABLES" = all ]; then
: >$D/modes.jsonl
for n in 4 8; do
  measure 4 gpt-bench $n $n,1,1 --tensor-mode 1d
  if [ $n = 4 ]; then measure 4 gpt-bench 4 1,2,2,1,1 --tensor-mode axonn3d; else measure 4 gpt-bench 8 2,2,2,1,1 --tensor-mode axonn3d; fi
  if [ $n = 4 ]; then measure 4 gpt-bench 4 4,1,1 --tensor-mode 2d; else measure 4 gpt-bench 8 8,1,1 --tensor-mode 2.5d --tensor-depth 2; fi
  if [ $n = 4 ]; then measure 4 gpt-bench 4 4,1,1 --tensor-mode 2d-broadcast; else measure 4 gpt-bench 8 8,1,1 --tensor-mode 2d-broadcast --tensor-depth 2; fi
  if [ $n = 8 ]; then measure 4 gpt-bench 8 8,1,1 --tensor-mode 3d; fi
  measure 4 gpt-bench $n $n,1,1 --tensor-mode sequence
done
python3 - $D/modes.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| ranks | tensor mode | grid | measured peak | predicted total | predicted / measured | measured vs 1d | "
      "predicted vs 1d | live after the step | predicted model state | predicted activations | predicted gathered W + "
      "unscattered dW |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    one = next(o for o in rows if o["ranks"] == r["ranks"] and o["mode"] == "--tensor-mode 1d")
    mode = r["mode"].replace("--tensor-mode ", "").replace(" --tensor-depth ", " d=")
    print(f"| {r['ranks']} | {mode} | {r['grid']} | {r['peak']:.1f} | {r['pred']:.1f} | {r['pred'] / r['peak']:.2f} | "
          f"{r['peak'] / one['peak']:.2f} | {r['pred'] / one['pred']:.2f} | {r['live']:.1f} | {r['state']:.1f} | "
          f"{r['act']:.1f} | {r['gathered']:.1f} |")
PY
fi
[ "$TABLES" = 4 ] && exit 0
sed 's/"num_layers": 4/"num_layers": 12/; s/"name": "gpt-bench"/"name": "gpt-bench-12"/' \
  "$(dirname "$0")/../model_zoo/models/gpt-bench.json" >$D/gpt-bench-12.json

if [ "$TABLES" != 3 ]; then
echo
echo "| model | grid | optimizer | measured model state (live after the step) | predicted model state | predicted / measured | measured peak | predicted total | predicted / measured | host tier measured / predicted |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for model in gpt-bench $D/gpt-bench-12.json; do
  for spec in "1 1,1,1,1,1" "2 1,1,1,2,1" "4 1,1,1,4,1"; do
    measure 2 $model $spec
    if [ "${spec%% *}" -le 2 ]; then
      for bsize in 65536 262144 1048576; do measure 2 $model $spec --offload-optimizer --bucket-elements $bsize; done
    fi
    if [ "${spec%% *}" -gt 1 ]; then
      for stage in 1 2; do
        measure 2 $model $spec --zero $stage
        measure 2 $model $spec --zero $stage --offload-optimizer --bucket-elements 65536
      done
    fi
  done
done
fi
[ "$TABLES" = 2 ] && exit 0

# Mixed precision: bf16 weights and activations, fp32 master and Adam.
echo
echo "| model, gradients | grid | optimizer | measured model state (live after the step) | predicted model state | predicted / measured | measured peak | predicted total | predicted / measured | host tier measured / predicted |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for grads in bf16 fp32; do
  PRECISION="--precision bf16 --grad-precision $grads"
  for model in gpt-bench $D/gpt-bench-12.json; do
    measure 3 $model 1 1,1,1,1,1
    for bsize in 65536 262144; do measure 3 $model 1 1,1,1,1,1 --offload-optimizer --bucket-elements $bsize; done
    measure 3 $model 4 1,1,1,4,1
    for stage in 1 2 3; do measure 3 $model 4 1,1,1,4,1 --zero $stage; done
    measure 3 $model 4 1,1,1,4,1 --zero 2 --offload-optimizer --bucket-elements 65536
  done
done
