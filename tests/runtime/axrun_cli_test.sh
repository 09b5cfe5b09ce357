#!/usr/bin/env bash
# axplan -> plan -> mpirun axrun end to end, and axrun's handling of bad input and of
# a failing rank. Usage: axrun_cli_test.sh AXPLAN AXRUN "MPIRUN [FLAGS...]"
set -uo pipefail
AXPLAN=$1 AXRUN=$2
read -r -a MPIRUN <<<"$3"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0 passes=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name=$1 want=$2 pattern=$3
  shift 4
  local start=$SECONDS
  timeout 120 "$@" >"$T/out" 2>&1
  local rc=$?
  local took=$((SECONDS - start))
  if [[ "$want" == nonzero ]]; then [[ $rc -ne 0 && $rc -ne 124 ]] && ok=1 || ok=0
  else [[ $rc -eq $want ]] && ok=1 || ok=0; fi
  if ((ok)) && ! grep -qE -- "$pattern" "$T/out"; then ok=0; fi
  if ((ok)); then
    passes=$((passes + 1)); echo "PASS $name (rc $rc, ${took}s)"
  else
    fails=$((fails + 1)); echo "FAIL $name (rc $rc, wanted $want and /$pattern/, ${took}s)"; sed 's/^/    /' "$T/out" | tail -20
  fi
}

"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --grid 2,1,2,1,1 --output "$T/p4.json" >/dev/null
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 2 --batch-seqs 4 --grid 1,2,1,1,1 --output "$T/p2.json" >/dev/null
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 8 --batch-seqs 8 --grid 8,1,1,1,1 --output "$T/p8.json" >/dev/null
"$AXPLAN" plan --model bert-large --topology perlmutter --gpus 2 --batch-seqs 2 --grid 1,2,1,1,1 --any-model \
  --output "$T/bert.json" >/dev/null
# The plan's mesh edited by hand: x = 1, y = 8 (4 heads over 8).
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["mesh"][0]["size"] = 1; p["mesh"][1]["size"] = 8
json.dump(p, open(sys.argv[2], "w"))' "$T/p8.json" "$T/bad_heads.json"

check "train 3 steps on 4 ranks" 0 "step +3/3 +loss" -- "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/p4.json" --steps 3 --measure "$T/m.json"
if grep -q '"forward_s"' "$T/m.json" 2>/dev/null && [ "$(grep -c '"step":' "$T/m.json")" -eq 3 ]; then
  passes=$((passes + 1)); echo "PASS measurement JSON has 3 steps with phase times"
else
  fails=$((fails + 1)); echo "FAIL measurement JSON"; cat "$T/m.json" 2>/dev/null | head -20
fi
# --threads sizes the BLAS's own pool too (runtime/compute_threads.hpp): OpenBLAS's
# default is every core, which at::set_num_threads does not reach.
if grep -q '"blas_threads_per_rank": 1,' "$T/m.json" 2>/dev/null && grep -q '"threads_per_rank": 1,' "$T/m.json"; then
  passes=$((passes + 1)); echo "PASS the BLAS computes on the one thread per rank that --threads gives"
else
  fails=$((fails + 1)); echo "FAIL blas_threads_per_rank"; grep threads "$T/m.json"
fi
# Device memory: every rank's peak beside the plan's prediction, and its last step's
# bytes by what held them (parameters, gradients, the rest, the step's own); a budget below the
# peak fails every rank like a GPU out of memory (exit 2, the message names the flag),
# and one a little above it trains. (Asynchronous collectives free their buffers at
# slightly different moments from run to run: the peak varies by a few KiB.)
peak=$(python3 - "$T/m.json" "$T/p4.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["device_memory"]
ranks, steps = m["peak_bytes_per_rank"], json.load(open(sys.argv[1]))["steps"]
ok = (len(ranks) == 4 and min(ranks) > 0 and m["peak_bytes"] == max(ranks) and m["predicted_bytes_per_gpu"] > 0
      and all(0 < s["peak_device_bytes"] <= ranks[0] for s in steps))
# The last step's bytes by what held them add up to its peak (the steps are rank 0's);
# the gradients (zeroed, not freed, by the optimizer) live at its start, in fp32 beside
# the plan's bf16 weights: twice their bytes.
kinds, precision = m["last_step_by_kind_per_rank"], json.load(open(sys.argv[2]))["precision"]
widen = precision["grad_reduce_bytes"] // precision["compute_bytes"]
ok = (ok and len(kinds) == 4 and widen == 2 and sum(kinds[0].values()) == steps[-1]["peak_device_bytes"]
      and all(k["parameter_bytes"] > 0 and k["gradient_bytes"] == widen * k["parameter_bytes"]
              and k["other_resident_bytes"] > 0 and k["step_bytes"] > 0 for k in kinds))
# Beside them, the plan's parts: they add up to its total (each part whole bytes).
predicted = m["predicted_by_kind"]
ok = (ok and predicted["model_state"] > 0 and predicted["activations"] > 0
      and abs(sum(predicted.values()) - m["predicted_bytes_per_gpu"]) <= len(predicted))
print(m["peak_bytes"] if ok else 0)
PY
)
# ($T/out is still the 4-rank run's.)
if [ "${peak:-0}" -gt 0 ] && grep -qE "measured / predicted by the plan: held between steps [0-9.]+ / [0-9.]+ MiB, the step's own [0-9.]+ / [0-9.]+ MiB" "$T/out"; then
  passes=$((passes + 1)); echo "PASS measurement JSON has each rank's peak device bytes ($peak), by what held them, and the prediction by part"
else
  fails=$((fails + 1)); echo "FAIL device memory in the measurement JSON"; peak=100000000
fi
check "a budget below the peak fails every rank as out of memory" 2 "out of device memory: .*budget .*--device-memory" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/p4.json" --steps 3 --measure "$T/mb.json" --device-memory $((peak / 2))
check "a budget 10% above the measured peak trains" 0 "step +3/3 +loss" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/p4.json" --steps 3 --measure "$T/mb.json" --device-memory $((peak * 11 / 10))
check "a budget with a unit" 2 "budget of 0.1 MiB" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/p4.json" --steps 1 --measure "$T/mb.json" --device-memory 100KiB
check "overlap flags and a trace per rank" 0 "communication .* exposed" -- "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/p4.json" \
  --steps 2 --overlap-level 4 --cache-layers 4 --checkpointing on --trace "$T/trace" --measure "$T/mt.json"
if [ -f "$T/trace/rank3.json" ] && grep -q '"ag_z"' "$T/trace/rank0.json" && grep -q '"rs_z"' "$T/trace/rank0.json" \
   && grep -q '"exposed_comm_s"' "$T/mt.json" \
   && python3 "$(dirname "$0")/../../tools/trace_summary.py" "$T/ts.json" p4 "$T/mt.json" "$T/trace/rank0.json" \
   && python3 - "$T/ts.json" "$T/trace/rank0.json" <<'PY'
import json, sys
# tools/trace_summary.py splits the trace by its step spans: two steps, the second summed
run = json.load(open(sys.argv[1]))["p4"]
steps = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e.get("cat") == "step"]
assert [e["name"] for e in steps] == ["step 1", "step 2"], steps
assert 0 < run["comm_busy_s"] and 0 < run["matmul_s"] < run["batch_s"], run
assert any(k.startswith("Forward ") for k in run["matmul_ms_by_op"]), run
PY
then
  passes=$((passes + 1)); echo "PASS traces name all-gathers and reduce-scatters and mark the steps; the measurement has the breakdown"
else
  fails=$((fails + 1)); echo "FAIL traces"; ls "$T/trace" 2>&1
fi
# --profile-ops: each rank's time by LibTorch operator over the steps after the first.
check "operator profile per rank" 0 "rank 0 spent [0-9.]+ s a step in LibTorch operators over 2 profiled step" -- \
  "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/p2.json" --steps 3 --measure "$T/mo.json" --profile-ops "$T/ops"
if python3 - "$T/ops" "$T/mo.json" <<'PY'
import json, sys
batch = sum(s["batch_s"] for s in json.load(open(sys.argv[2]))["steps"][1:])
for r in (0, 1):
    p = json.load(open(f"{sys.argv[1]}/rank{r}-ops.json"))
    ops = {o["name"]: o for o in p["ops"]}
    assert p["steps"] == 2, p["steps"]
    assert ops["aten::mm"]["calls"] > 0 and ops["aten::mm"]["self_s"] > 0, ops.get("aten::mm")
    self_s = sum(o["self_s"] for o in p["ops"])
    assert 0 < self_s < batch, (self_s, batch)  # the operators ran inside the profiled steps
    assert all(abs(sum(o["self_s_by_caller"].values()) - o["self_s"]) < 1e-9 for o in p["ops"])
PY
then
  passes=$((passes + 1)); echo "PASS operator profiles: aten::mm in both ranks' files, self times inside the steps"
else
  fails=$((fails + 1)); echo "FAIL operator profiles"; ls "$T/ops" 2>&1
fi
# tools/data_wait.py: each data group's wait for its last member, from every rank's trace.
# By hand first: x = 2, data = 2 (groups {0, 2} and {1, 3}); step 1 is left out; in step 2
# ranks 0 and 2 arrive at 1.0 and 1.3 s, ranks 1 and 3 at 1.1 and 1.05 s (an ar_x before and
# a second ar_data after are not arrivals): waits 0.3, 0 and 0, 0.05.
mkdir -p "$T/dw"
if python3 - "$T/dw" <<'PY'
import json, sys
d = sys.argv[1]
json.dump({"mesh": [{"name": "x", "size": 2}, {"name": "data", "size": 2}]}, open(f"{d}/plan.json", "w"))
arrive = {0: 1.0, 1: 1.1, 2: 1.3, 3: 1.05}
for r, t in arrive.items():
    us = lambda s: s * 1e6
    ev = [{"ph": "X", "cat": "step", "name": "step 1", "ts": 0, "dur": us(0.5)},
          {"ph": "X", "cat": "comm", "name": "ar_data", "ts": us(0.1 * r), "dur": 10},
          {"ph": "X", "cat": "step", "name": "step 2", "ts": us(0.5), "dur": us(1.5)},
          {"ph": "X", "cat": "comm", "name": "ar_x", "ts": us(0.6), "dur": 10},
          {"ph": "X", "cat": "comm", "name": "ar_data", "ts": us(t), "dur": 10},
          {"ph": "X", "cat": "comm", "name": "ar_data", "ts": us(1.4), "dur": 10}]
    json.dump({"traceEvents": ev}, open(f"{d}/rank{r}.json", "w"))
PY
then
  dw=$(python3 "$(dirname "$0")/../../tools/data_wait.py" "$T/dw/plan.json" "$T/dw" --json "$T/dw/out.json" 2>&1)
fi
if python3 - "$T/dw/out.json" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
close = lambda a, b: abs(a - b) < 1e-9
waits = sorted((tuple(s["group"]), [round(w, 9) for w in s["waits_s"]]) for s in r["group_steps"])
assert waits == [((0, 2), [0.3, 0.0]), ((1, 3), [0.0, 0.05])], waits
assert close(r["mean_wait_s"], 0.0875) and close(r["median_group_step_wait_s"], 0.0875), r
assert close(r["rank0_mean_wait_s"], 0.3), r
PY
then
  passes=$((passes + 1)); echo "PASS data_wait.py: hand-made traces give the hand waits ($dw)"
else
  fails=$((fails + 1)); echo "FAIL data_wait.py on hand-made traces: $dw"
fi
# And on a real data-parallel run: per group and step kept, the last member waits 0 and
# the others more; a plan without a data group is refused (exit 2, naming the plan).
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --grid 1,1,1,4,1 --output "$T/pd.json" >/dev/null
if "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/pd.json" --steps 3 --trace "$T/dtrace" --measure "$T/md.json" >"$T/out" 2>&1 \
   && python3 "$(dirname "$0")/../../tools/data_wait.py" "$T/pd.json" "$T/dtrace" --json "$T/dw/real.json" >"$T/out" 2>&1 \
   && python3 - "$T/dw/real.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert [s["step"] for s in r["group_steps"]] == [1, 2], r  # steps 2 and 3 of the run
for s in r["group_steps"]:
    assert s["group"] == [0, 1, 2, 3] and min(s["waits_s"]) == 0 and max(s["waits_s"]) > 0, s
PY
then
  passes=$((passes + 1)); echo "PASS data_wait.py on a traced 4-rank data-parallel run: $(cat "$T/out")"
else
  fails=$((fails + 1)); echo "FAIL data_wait.py on a real run"; tail -5 "$T/out"
fi
check "data_wait.py refuses a plan without a data group" 2 "p4.json: no data group" -- \
  python3 "$(dirname "$0")/../../tools/data_wait.py" "$T/p4.json" "$T/trace"
check "bad overlap flag" 2 "" -- "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/p4.json" --prefetch-all-gather maybe
# How a waiting rank passes the time (runtime/idle_wait.hpp): --wait auto sleeps where
# the machine's cores are fewer than its ranks' threads (4 ranks, 1 thread each), and
# no policy changes a number: the same losses, bit for bit, as the first run's.
check "bad wait policy" 2 "--wait" -- "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/p4.json" --wait spin
auto_policy=$(python3 -c 'import os; print("sleep" if len(os.sched_getaffinity(0)) < 4 else "yield")')
for policy in sleep yield; do
  check "--wait $policy trains" 0 "a waiting rank .* \\(--wait $policy\\)" -- "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/p4.json" \
    --steps 3 --wait $policy --measure "$T/m-$policy.json"
done
if python3 - "$T/m.json" "$T/m-sleep.json" "$T/m-yield.json" "$auto_policy" <<'PY'
import json, sys
runs = [json.load(open(f)) for f in sys.argv[1:4]]
losses = [[s["loss"] for s in r["steps"]] for r in runs]
policies = [r["wait_policy"] for r in runs]
ok = losses[0] == losses[1] == losses[2] and len(losses[0]) == 3 and policies == [sys.argv[4], "sleep", "yield"]
print(losses, policies)
sys.exit(0 if ok else 1)
PY
then
  passes=$((passes + 1)); echo "PASS --wait auto ($auto_policy here), sleep and yield give the same losses bit for bit"
else
  fails=$((fails + 1)); echo "FAIL --wait: losses or policies differ"
fi
check "byte-level LM on a text file" 0 "step +2/2" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/p2.json" --steps 2 \
  --data /usr/share/common-licenses/GPL-3 --measure "$T/m2.json"
check "world size differs from the plan" 2 "needs 4 ranks .* but the job has 2" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/p4.json"
check "plan for a model the runtime cannot run" 2 "family \"explicit\"" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/bert.json"
check "grid does not divide the model" 2 "heads=4 is not divisible by gy=8" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/bad_heads.json"
check "missing data file" 2 "cannot open data file: $T/nope.txt" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/p2.json" --data "$T/nope.txt"
check "missing plan file" 2 "cannot open file" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/none.json"
# Progress: --log-every 2 prints steps 2, 4 and the last (5), each a full line; under
# mpirun the ranks' output is a pseudo-terminal, so without the flag the line is live.
check "a progress line every 2 steps" 0 "step +5/5 +loss .* tokens/s +ETA" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/p2.json" \
  --steps 5 --log-every 2 --measure "$T/m5.json"
if [ "$(grep -c "^step " "$T/out")" -eq 3 ] && grep -qE "^step +4/5" "$T/out" && ! grep -q $'\r' "$T/out"; then
  passes=$((passes + 1)); echo "PASS --log-every 2: lines at steps 2, 4, 5 only"
else
  fails=$((fails + 1)); echo "FAIL --log-every 2"; cat -A "$T/out" | tail -8
fi
check "a live progress line on a terminal" 0 "ETA" -- "${MPIRUN[@]}" -np 2 "$AXRUN" --plan "$T/p2.json" --steps 3 --measure "$T/m6.json"
if [ "$(grep -o $'\r' "$T/out" | wc -l)" -eq 3 ]; then
  passes=$((passes + 1)); echo "PASS live line rewritten after each of the 3 steps"
else
  fails=$((fails + 1)); echo "FAIL live line"; cat -A "$T/out" | tail -4
fi

# Slurm (srun): rank and size come from SLURM_* (set by hand here: no Slurm); they
# must agree with MPI's world.
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 1 --batch-seqs 4 --output "$T/p1.json" >/dev/null
check "under srun (SLURM_* variables)" 0 "launched by slurm" -- env SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 \
  "$AXRUN" --plan "$T/p1.json" --steps 2 --measure "$T/m7.json"
grep -q '"launcher": "slurm"' "$T/m7.json" && { passes=$((passes + 1)); echo "PASS measurement names the launcher"; } \
  || { fails=$((fails + 1)); echo "FAIL measurement names the launcher"; }
check "srun task count differs from MPI's world" 2 "the launcher \(slurm\) started task 0 of 2, but MPI sees rank 0 of 1" -- \
  env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 "$AXRUN" --plan "$T/p1.json" --steps 2

# Pipelines through the CLI: every schedule prints the same per-step loss as the 1-rank
# plan with the same seed (Z x pipeline on 4 ranks; 2 stages of 1 block each).
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 1 --batch-seqs 8 --precision fp32 --output "$T/one.json" >/dev/null
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --grid 1,1,2,1,2 --precision fp32 \
  --output "$T/pipe.json" >/dev/null
losses() { grep -oE "^step +[0-9]+/[0-9]+ +loss [0-9.]+" "$1" | awk '{print $2, $4}'; }
check "1-rank reference" 0 "step +4/4" -- "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/one.json" --steps 4 --seed 5 \
  --log-every 1 --measure "$T/m_one.json"
losses "$T/out" >"$T/one.losses"
same_as_one() {  # same_as_one NAME: the last run printed the 1-rank plan's losses
  losses "$T/out" >"$T/$1.losses"
  if [ -s "$T/one.losses" ] && cmp -s "$T/one.losses" "$T/$1.losses"; then
    passes=$((passes + 1)); echo "PASS $1 prints the 1-rank plan's losses: $(tr '\n' ' ' <"$T/one.losses")"
  else
    fails=$((fails + 1)); echo "FAIL $1 losses differ"; paste "$T/one.losses" "$T/$1.losses"
  fi
}
# trains_as_one NAME PATTERN PLAN [AXRUN FLAGS...]: 4 steps of PLAN on 4 ranks print
# PATTERN and the 1-rank plan's losses.
trains_as_one() {
  local name=$1 pattern=$2 plan=$3
  shift 3
  check "$name" 0 "$pattern" -- "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$plan" "$@" --steps 4 --seed 5 --log-every 1
  same_as_one "$(tr -c 'A-Za-z0-9\n' '_' <<<"$name")"
}
for sched in message-driven 1f1b gpipe; do
  trains_as_one "pipeline $sched" "pipeline $sched" "$T/pipe.json" --pipeline-schedule "$sched" --measure "$T/m_$sched.json"
done
# --search-order: on 2 nodes of 2 the searched placement puts gpt-tiny's data-parallel
# pair inside a node and the pipeline across; the plan carries that order and axrun,
# laying the ranks out by it, prints the 1-rank plan's losses.
cat >"$T/two_per_node.json" <<'JSON'
{"name": "two-per-node", "gpus_per_node": 2, "num_nodes": 2, "gpu_memory_bytes": 17179869184,
 "peak_flops_per_s": 1e14, "intra_node_bandwidth_bytes_per_s": 1e11, "inter_node_bandwidth_bytes_per_s": 1e9}
JSON
check "--search-order picks data inside the node" 0 "placement order x,y,z,data,pipe \(searched" -- "$AXPLAN" plan \
  --model gpt-tiny --topology "$T/two_per_node.json" --gpus 4 --batch-seqs 8 --grid 1,1,1,2,2 --precision fp32 \
  --search-order --output "$T/searched.json"
check "the plan's mesh is in the searched order" 0 '"mesh": \[ *\{ *"name": *"x"[^]]*"y"[^]]*"z"[^]]*"data"[^]]*"pipe"' -- \
  tr -d '\n' <"$T/searched.json"
trains_as_one "a pipeline in the searched order" "pipeline message-driven" "$T/searched.json"
# Sequence parallelism through the CLI (--tensor-mode sequence, ring self-attention): the
# sequences split over 2 ranks in each of 2 replicas, and over all 4 (with ZeRO-1), print
# the 1-rank plan's losses; bad sequence grids are refused.
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --precision fp32 --tensor-mode sequence \
  --grid 2,2 --output "$T/seq.json" >/dev/null
trains_as_one "sequence parallelism, 2 replicas of 2" "grid gx=1 gy=1 gz=1 gdata=4 ginter=1 sequence=2" "$T/seq.json"
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --precision fp32 --tensor-mode sequence \
  --grid 4,1 --output "$T/seq4.json" >/dev/null
trains_as_one "sequence parallelism over 4 ranks, ZeRO-1" "sequence=4" "$T/seq4.json" --zero 1
# Megatron's 1D (AxoNN's 3D on 1,t,1) over 4 ranks, and every mode ranked together.
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --precision fp32 --tensor-mode 1d \
  --grid 4,1 --output "$T/oned.json" >/dev/null
trains_as_one "1d over 4 ranks" "grid gx=1 gy=4 gz=1 gdata=1 ginter=1," "$T/oned.json"
# Colossal-AI's 2D (SUMMA's layout) on a 2 x 2 grid.
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --precision fp32 --tensor-mode 2d \
  --grid 4,1 --output "$T/twod.json" >/dev/null
trains_as_one "2d over a 2 x 2 grid" "grid gx=1 gy=2 gz=2 gdata=1 ginter=1 2d" "$T/twod.json"
check "a 2d group that is not a square" 2 "the 2d tensor group of 8 ranks is not a square.*--grid 8,1" -- \
  "$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 8 --batch-seqs 8 --tensor-mode 2d --grid 8,1 \
  --output "$T/twod_bad.json"
check "a 2d plan on a mesh with an X axis" 2 "the 2d layout on gx=2 gy=2 gz=2.*twod_x.json: /mesh" -- \
  bash -c "python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p[\"mesh\"][0][\"size\"] = 2; json.dump(p, open(sys.argv[2], \"w\"))' '$T/twod.json' '$T/twod_x.json' && '$AXRUN' --plan '$T/twod_x.json' --steps 1"
# Tesseract's 2.5D at depth 2 on 8 ranks is the 2d grid 1,2,2,2,1 (its depth is data
# parallelism of the 2d layers).
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 8 --batch-seqs 8 --precision fp32 --tensor-mode 2.5d \
  --tensor-depth 2 --grid 8,1 --output "$T/tess.json" >/dev/null
check "2.5d (q=2, d=2) over 8 ranks" 0 "grid gx=1 gy=2 gz=2 gdata=2 ginter=1 2d" -- "${MPIRUN[@]}" -np 8 "$AXRUN" \
  --plan "$T/tess.json" --steps 4 --seed 5 --log-every 1
same_as_one "2.5d_over_8_ranks"
# SUMMA as the paper runs it (2d-broadcast: block broadcasts, no weight gathered), on
# 2 x 2 and at depth 2 over 8 ranks; ZeRO-3, which gathers weights at their fetch, is
# refused by planner and runtime alike.
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --precision fp32 \
  --tensor-mode 2d-broadcast --grid 4,1 --output "$T/twodb.json" >/dev/null
trains_as_one "2d-broadcast over a 2 x 2 grid" "grid gx=1 gy=2 gz=2 gdata=1 ginter=1 2d-broadcast" "$T/twodb.json"
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 8 --batch-seqs 8 --precision fp32 \
  --tensor-mode 2d-broadcast --tensor-depth 2 --grid 8,1 --output "$T/tessb.json" >/dev/null
check "2d-broadcast at depth 2 over 8 ranks" 0 "grid gx=1 gy=2 gz=2 gdata=2 ginter=1 2d-broadcast" -- "${MPIRUN[@]}" \
  -np 8 "$AXRUN" --plan "$T/tessb.json" --steps 4 --seed 5 --log-every 1
same_as_one "2d-broadcast_depth_2_over_8_ranks"
check "axrun refuses ZeRO-3 with 2d-broadcast" 2 "ZeRO-3 with the 2d-broadcast layout" -- "${MPIRUN[@]}" -np 8 \
  "$AXRUN" --plan "$T/tessb.json" --zero 3 --pipeline-schedule 1f1b --steps 1
check "axplan refuses ZeRO-3 with 2d-broadcast" 2 "ZeRO-3 gathers each weight over the data group at its fetch" -- \
  "$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 8 --batch-seqs 8 --tensor-mode 2d-broadcast \
  --tensor-depth 2 --grid 8,1 --zero 3 --output "$T/tessb_bad.json"
check "--tensor-depth without 2.5d" 2 "--tensor-depth 2 with --tensor-mode 2d" -- "$AXPLAN" plan --model gpt-tiny \
  --topology perlmutter --gpus 8 --batch-seqs 8 --tensor-mode 2d --tensor-depth 2 --grid 8,1 --output "$T/tess_bad.json"
# Colossal-AI's 3D on the 2 x 2 x 2 cube.
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 8 --batch-seqs 8 --microbatch-seqs 8 --precision fp32 \
  --tensor-mode 3d --grid 8,1 --output "$T/cube.json" >/dev/null
check "3d over a 2 x 2 x 2 cube" 0 "grid gx=2 gy=2 gz=2 gdata=1 ginter=1 3d" -- "${MPIRUN[@]}" -np 8 "$AXRUN" \
  --plan "$T/cube.json" --steps 4 --seed 5 --log-every 1
same_as_one "3d_over_8_ranks"
check "a 3d group that is not a cube" 2 "the 3d tensor group of 4 ranks is not a cube" -- "$AXPLAN" plan \
  --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --tensor-mode 3d --grid 4,1 --output "$T/cube_bad.json"
for mode in 1d sequence 2d 2d-broadcast 3d axonn3d; do
  check "--tensor-mode all ranks the $mode grids" 0 "\"tensor_mode\": \"$mode\"" -- "$AXPLAN" rank --model gpt-20b \
    --topology perlmutter --gpus 64 --batch-seqs 64 --tensor-mode all --top 0 --format json
done
check "a sequence group that does not divide the sequence" 2 "sequence length=16 is not divisible by the sequence group=3" -- \
  "$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 3 --batch-seqs 6 --tensor-mode sequence --grid 3,1 \
  --output "$T/seq_bad.json"
check "a sequence grid of the wrong size" 2 "grid product 8 differs from the GPU count.*t,gdata,ginter whose product is 4" -- \
  "$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --tensor-mode sequence --grid 4,2 \
  --output "$T/seq_bad.json"
check "a plan whose sequence axis is not right inside data" 2 "does not place \"sequence\" right inside \"data\".*seq_apart.json: /mesh" -- \
  bash -c "python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); m = p[\"mesh\"]; m[3], m[4] = m[4], m[3]; json.dump(p, open(sys.argv[2], \"w\"))' '$T/seq.json' '$T/seq_apart.json' && '$AXRUN' --plan '$T/seq_apart.json' --steps 1"
# L2L through the CLI: 4 data-parallel replicas relaying the units through the device
# print the 1-rank plan's losses, with the stash on the host and on the device.
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --precision fp32 --strategy l2l \
  --l2l-microbatches 2 --output "$T/l2l.json" >/dev/null
trains_as_one "L2L, stash on the host" "L2L: 2 units relayed .* 2 micro-batch\(es\) per visit, stash on the host" \
  "$T/l2l.json" --measure "$T/m_l2l.json"
grep -q '"host_peak_bytes": [1-9]' "$T/m_l2l.json" && { passes=$((passes + 1)); echo "PASS L2L measures the host tier"; } \
  || { fails=$((fails + 1)); echo "FAIL L2L host bytes"; }
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --precision fp32 --strategy l2l \
  --l2l-stash device --l2l-no-prefetch --output "$T/l2l_device.json" >/dev/null
trains_as_one "L2L, stash on the device" "stash on the device, prefetch off" "$T/l2l_device.json"
check "axrun refuses ZeRO with an l2l plan" 2 "an optimizer or pipeline option with an l2l plan" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/l2l.json" --zero 1 --steps 1
check "L2L refuses a grid" 2 "--grid with --strategy l2l" -- "$AXPLAN" plan --model gpt-tiny --topology perlmutter \
  --gpus 4 --batch-seqs 8 --strategy l2l --grid 2,1,1,2,1 --output "$T/l2l_bad.json"
check "L2L refuses micro-batches that do not divide" 2 "no feasible candidate: .*batch 8 over 4 replicas of 3 micro-batches does not divide" -- \
  "$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --strategy l2l --l2l-microbatches 3 \
  --output "$T/l2l_bad.json"
# The offloaded optimizer through the CLI: data x pipeline on 4 ranks prints the 1-rank
# plan's losses (small buckets, every chunk overlapped).
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --grid 1,1,1,2,2 --precision fp32 \
  --offload-optimizer --bucket-elements 1000 --allreduce-coarsening 2 --output "$T/offload.json" >/dev/null
trains_as_one "offloaded optimizer" "optimizer offloaded to the host tier, buckets of 1000 elements" "$T/offload.json" \
  --measure "$T/m_offload.json"
grep -q '"host_peak_bytes": [1-9]' "$T/m_offload.json" && { passes=$((passes + 1)); echo "PASS offload measures the host tier"; } \
  || { fails=$((fails + 1)); echo "FAIL offload host bytes"; }
# ZeRO-1 through the CLI: 4 data-parallel ranks, then with the offloaded plan above
# (data x pipeline, the master weights sharded in the host tier).
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --grid 1,1,1,4,1 --precision fp32 \
  --zero 1 --output "$T/zero.json" >/dev/null
trains_as_one "ZeRO-1" "ZeRO stage 1: Adam's state sharded over the 4 data-parallel ranks" "$T/zero.json" \
  --measure "$T/m_zero1.json"
trains_as_one "ZeRO-1 offloaded" "ZeRO stage 1: Adam's state and master weights \(host tier\) sharded over the 2" \
  "$T/offload.json" --zero 1
# ZeRO-2 alike: the gradients reduced to their owners during each backward (data x
# pipeline, message-driven, two micro-batches per replica in the offloaded plan).
trains_as_one "ZeRO-2" "ZeRO stage 2: Adam's state and the weight gradients sharded over the 4" "$T/zero.json" --zero 2 \
  --measure "$T/m_zero2.json"
trains_as_one "ZeRO-2 offloaded" "ZeRO stage 2: Adam's state, master weights \(host tier\) and the weight gradients" \
  "$T/offload.json" --zero 2
# ZeRO-3: the weights gathered from their owners at each fetch. The message-driven
# pipeline with two replicas is refused (its passes follow message arrival); 1F1B runs.
trains_as_one "ZeRO-3" "ZeRO stage 3: Adam's state, the weight gradients and the weights sharded over the 4" \
  "$T/zero.json" --zero 3 --measure "$T/m_zero3.json"
# Each stage shards what it names, and the device memory by what held it shows it (the
# optimizer's own buffers counted: ZeRO-2's owned gradient block, ZeRO-3's weights): over
# 4 data-parallel ranks, ZeRO-2 holds a quarter of ZeRO-1's gradient bytes (its owned
# block, plus the vectors' gradients that stay whole) and ZeRO-3 a quarter of ZeRO-2's
# parameter bytes; Adam's state, sharded from stage 1, stays.
if python3 - "$T/m_zero1.json" "$T/m_zero2.json" "$T/m_zero3.json" <<'PY'
import json, sys
k1, k2, k3 = (json.load(open(f))["device_memory"]["last_step_by_kind_per_rank"][0] for f in sys.argv[1:])
ok = (all(k["parameter_bytes"] > 0 and k["gradient_bytes"] > 0 for k in (k1, k2, k3))
      and k1["gradient_bytes"] / 4 <= k2["gradient_bytes"] < k1["gradient_bytes"] / 2
      and k2["parameter_bytes"] == k1["parameter_bytes"]
      and k2["parameter_bytes"] / 4 <= k3["parameter_bytes"] < k2["parameter_bytes"] / 2
      and k3["gradient_bytes"] == k2["gradient_bytes"]
      and k1["other_resident_bytes"] == k2["other_resident_bytes"] == k3["other_resident_bytes"])
print(k1, k2, k3)
sys.exit(0 if ok else 1)
PY
then
  passes=$((passes + 1)); echo "PASS ZeRO-2 shards the gradient bytes, ZeRO-3 the parameter bytes"
else
  fails=$((fails + 1)); echo "FAIL ZeRO's device memory by what held it"
fi
check "ZeRO-3 refuses the message-driven pipeline with replicas" 2 "ZeRO-3 with the message-driven pipeline.*1f1b or gpipe" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/offload.json" --zero 3 --steps 2
trains_as_one "ZeRO-3 offloaded, 1F1B pipeline" "pipeline 1f1b" "$T/offload.json" --zero 3 --pipeline-schedule 1f1b
# Mixed precision through the CLI: the README's text example (gpt-tiny on grid
# 2,1,2,1,1, 16 sequences of the GPL per step) in bf16 follows its fp32 loss curve: the
# 10-step running mean within 2% everywhere, every step within 5%. 100 steps here (the
# test command's time; AXONN_README_STEPS=200 runs the README's 200, as in
# docs/performance.md).
readme_steps=${AXONN_README_STEPS:-100}
readme_plan=("$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 16 --grid 2,1,2,1,1)
"${readme_plan[@]}" --precision fp32 --output "$T/readme_fp32.json" >/dev/null
"${readme_plan[@]}" --precision bf16 --output "$T/readme_bf16.json" >/dev/null
check "README example, fp32, $readme_steps steps" 0 "step +$readme_steps/$readme_steps" -- "${MPIRUN[@]}" -np 4 "$AXRUN" \
  --plan "$T/readme_fp32.json" --steps "$readme_steps" --data /usr/share/common-licenses/GPL-3 --log-every 100 --measure "$T/m_readme_fp32.json"
check "README example, bf16, $readme_steps steps" 0 "mixed precision: bf16 weights and activations, fp32 gradients" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/readme_bf16.json" --steps "$readme_steps" --data /usr/share/common-licenses/GPL-3 \
  --log-every 100 --measure "$T/m_readme_bf16.json"
curve=$(python3 - "$T/m_readme_fp32.json" "$T/m_readme_bf16.json" "$readme_steps" <<'PY'
import json, sys
a, b = ([s["loss"] for s in json.load(open(f))["steps"]] for f in sys.argv[1:3])
steps = int(sys.argv[3])
mean = lambda v, i: sum(v[i:i + 10]) / 10
step = max(abs(x - y) / x for x, y in zip(a, b))
running = max(abs(mean(a, i) - mean(b, i)) / mean(a, i) for i in range(len(a) - 9))
ok = len(a) == len(b) == steps and running < 0.02 and step < 0.05
print(("ok" if ok else "no"), f"running mean {running:.4f}, step {step:.4f}, last {a[-1]:.4f} / {b[-1]:.4f}")
PY
)
if [[ "$curve" == ok* ]]; then
  passes=$((passes + 1)); echo "PASS bf16 follows the fp32 loss curve (${curve#ok })"
else
  fails=$((fails + 1)); echo "FAIL bf16 loss curve: $curve"
fi
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --grid 1,1,1,2,2 --precision bf16 \
  --grad-precision bf16 --zero 2 --offload-optimizer --bucket-elements 1000 --output "$T/bf16_zero.json" >/dev/null
check "bf16 gradients, ZeRO-2 offloaded, data x pipeline" 0 "step +4/4 +loss" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/bf16_zero.json" --steps 4 --seed 5 --log-every 1
check "bf16 gradients need bf16 weights" 2 "--grad-precision bf16 with --precision fp32" -- \
  "$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 1 --batch-seqs 8 --precision fp32 --grad-precision bf16
sed 's/"compute_bytes": 2/"compute_bytes": 8/' "$T/readme_bf16.json" >"$T/fp64.json"
check "a precision the runtime does not run" 2 "precision.compute_bytes is 8.*fp64.json.*2 \(bf16\) or 4 \(fp32\)" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/fp64.json" --steps 1

# peak_matches NAME PERCENT_REGEX WANTED: the measured peak (the worst rank's), read
# from the output of the check just run, against the plan's prediction; the percentage
# axrun prints is the prediction's over the measured peak.
peak_matches() {
  local line
  line=$(grep -o "peak device memory.*" "$T/out" || echo "no peak printed")
  if grep -qE "predicted [0-9.]+ MiB by the plan \(($2)%\)" "$T/out"; then
    passes=$((passes + 1)); echo "PASS $1: $line"
  else
    fails=$((fails + 1)); echo "FAIL $1 (wanted $3): $line"
  fi
}
# Within 5% of the prediction (issue #12).
peak_within_5() { peak_matches "$1" "[+-]([0-4]\.[0-9]|5\.0)" "within 5%"; }
# Where the measured peak depends on timing: never more than 5% above the prediction
# (the planner's budget must hold), the prediction at most 14% above it. ZeRO-2's and
# ZeRO-3's peaks on 4 ranks are 48.8 and 39.8 MiB (predictions 49.5 and 40.5) when only
# the reducer's settle(kSinkDepth) retires the data reduce-scatters, and 44.8 and
# 35.8 MiB (+10.5%, +13.1%) when each is waited for at once; 45.8 and 36.8 MiB were
# measured in a few runs (docs/runtime.md, "ZeRO-2 and ZeRO-3 peaks that move with the
# timing").
peak_bounded() {
  peak_matches "$1" "-([0-4]\.[0-9]|5\.0)|\+([0-9]|1[0-3])\.[0-9]|\+14\.0" \
    "at most 5% above the prediction, the prediction at most 14% above it"
}

# A budget that the optimizer on the device exceeds and the offloaded one fits: the
# planner predicts both (rejected, then feasible), and the runtime does both (out of
# memory, then trained). gpt-bench on one rank, a 115 MiB GPU.
sed 's/"gpu_memory_bytes": [0-9]*/"gpu_memory_bytes": 120586240/' "$(dirname "$0")/../../topology/clusters/perlmutter.json" \
  >"$T/small_gpu.json"
check "the planner rejects the optimizer on the device under 115 MiB" 2 "124.0 MiB > 115.0 MiB" -- \
  "$AXPLAN" plan --model gpt-bench --topology "$T/small_gpu.json" --gpus 1 --batch-seqs 16 --precision fp32 \
  --output "$T/small_device.json"
check "the planner fits the offloaded optimizer under 115 MiB" 0 "wrote" -- \
  "$AXPLAN" plan --model gpt-bench --topology "$T/small_gpu.json" --gpus 1 --batch-seqs 16 --precision fp32 \
  --offload-optimizer --bucket-elements 65536 --output "$T/small_offload.json"
"$AXPLAN" plan --model gpt-bench --topology perlmutter --gpus 1 --batch-seqs 16 --precision fp32 \
  --output "$T/bench_device.json" >/dev/null
check "the optimizer on the device runs out of a 115 MiB budget" 2 "out of device memory" -- \
  "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/bench_device.json" --steps 2 --device-memory 115MiB --measure "$T/mb1.json"
check "the offloaded optimizer trains in a 115 MiB budget" 0 "peak host-tier memory" -- \
  "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/small_offload.json" --steps 2 --device-memory 115MiB --measure "$T/mb2.json"
peak_within_5 "the offloaded optimizer's peak is predicted"
check "gpt-bench trains on one rank" 0 "step +2/2" -- "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/bench_device.json" --steps 2
peak_within_5 "one rank's peak (the loss) is predicted"
"$AXPLAN" plan --model gpt-bench --topology perlmutter --gpus 4 --batch-seqs 16 --precision fp32 --grid 1,1,1,4,1 \
  --output "$T/bench_dp.json" >/dev/null
check "gpt-bench trains on 4 data-parallel ranks" 0 "step +2/2" -- \
  "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/bench_dp.json" --steps 2
peak_within_5 "the data-parallel peak (the buckets) is predicted"
# bf16 matmuls are slow on a CPU (no bf16 BLAS): 2 sequences a step (12 s; 4 took 18 s, 16
# took 88 s), the peak still within 0.3% of the prediction.
"$AXPLAN" plan --model gpt-bench --topology perlmutter --gpus 1 --batch-seqs 2 --output "$T/bench_bf16.json" >/dev/null
check "gpt-bench trains on one rank in bf16" 0 "step +2/2" -- \
  "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/bench_bf16.json" --steps 2
peak_within_5 "the bf16 peak is predicted"
"$AXPLAN" plan --model gpt-bench --topology perlmutter --gpus 4 --batch-seqs 16 --precision fp32 --grid 1,1,1,1,4 \
  --pipeline-schedule gpipe --microbatch-seqs 1 --output "$T/bench_gpipe.json" >/dev/null
check "gpt-bench trains on 4 GPipe stages" 0 "step +2/2" -- "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/bench_gpipe.json" --steps 2
peak_within_5 "GPipe's peak (16 micro-batches waiting on the last stage) is predicted"
# L2L under a GPU smaller than any 4D plan's model state: the planner rejects every
# grid and, ranking both strategies, picks L2L; axrun under that budget runs out with the
# 4D plan and trains the L2L one, at the predicted peak. gpt-bench on one rank, 40 MiB.
sed 's/"gpu_memory_bytes": [0-9]*/"gpu_memory_bytes": 41943040/' "$(dirname "$0")/../../topology/clusters/perlmutter.json" \
  >"$T/gpu40.json"
check "no 4D grid fits 40 MiB" 2 "no feasible candidate: smallest memory per GPU is 124.0 MiB > 40.0 MiB" -- \
  "$AXPLAN" plan --model gpt-bench --topology "$T/gpu40.json" --gpus 1 --batch-seqs 16 --precision fp32 \
  --output "$T/l2l40_4d.json"
check "ranked together, only L2L fits 40 MiB" 0 "l2l u=16 host" -- "$AXPLAN" rank --model gpt-bench \
  --topology "$T/gpu40.json" --gpus 1 --batch-seqs 16 --precision fp32 --strategy all --show-rejected
check "the plan over both strategies is L2L's" 0 "strategy l2l: .* 16 micro-batch" -- "$AXPLAN" plan --model gpt-bench \
  --topology "$T/gpu40.json" --gpus 1 --batch-seqs 16 --precision fp32 --strategy all --output "$T/l2l40.json"
check "the 4D plan runs out of a 40 MiB budget" 2 "out of device memory" -- \
  "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/bench_device.json" --steps 2 --device-memory 40MiB
check "the L2L plan trains in a 40 MiB budget" 0 "step +2/2" -- \
  "${MPIRUN[@]}" -np 1 "$AXRUN" --plan "$T/l2l40.json" --steps 2 --device-memory 40MiB --log-every 1
peak_within_5 "L2L's peak (the last unit's visit) is predicted"
# The same both ways for the ZeRO stages, gpt-bench on NP data-parallel ranks:
# budget_both_ways MIB NP WITHOUT WITH REJECTION: under a GPU of MIB MiB the planner
# rejects ZeRO stage WITHOUT (saying REJECTION) and fits stage WITH; axrun with
# --device-memory MIB runs out with the first and trains with the second; PEAK_CHECK
# (default peak_within_5) compares its peak with the plan's.
budget_both_ways() {
  local mib=$1 np=$2 without=$3 with=$4 rejection=$5 name_without="ZeRO-$3" peak_check=${6:-peak_within_5}
  [ "$without" = 0 ] && name_without="plain data parallelism"
  sed "s/\"gpu_memory_bytes\": [0-9]*/\"gpu_memory_bytes\": $((mib * 1048576))/" \
    "$(dirname "$0")/../../topology/clusters/perlmutter.json" >"$T/gpu$mib.json"
  local plan=("$AXPLAN" plan --model gpt-bench --topology "$T/gpu$mib.json" --gpus "$np" --batch-seqs 16
              --grid "1,1,1,$np,1" --precision fp32)
  check "the planner rejects $name_without under $mib MiB" 2 "$rejection" -- "${plan[@]}" --zero "$without" \
    --output "$T/without$mib.json"
  check "the planner fits ZeRO-$with under $mib MiB" 0 "wrote" -- "${plan[@]}" --zero "$with" --output "$T/with$mib.json"
  check "$name_without runs out of a $mib MiB budget" 2 "out of device memory" -- \
    "${MPIRUN[@]}" -np "$np" "$AXRUN" --plan "$T/with$mib.json" --zero "$without" --steps 2 --device-memory "${mib}MiB"
  check "ZeRO-$with trains in a $mib MiB budget" 0 "step +2/2" -- \
    "${MPIRUN[@]}" -np "$np" "$AXRUN" --plan "$T/with$mib.json" --steps 2 --device-memory "${mib}MiB" --log-every 1
  "$peak_check" "ZeRO-$with's peak on $np ranks is predicted"
}
budget_both_ways 90 2 0 1 "94.0 MiB > 90.0 MiB"
budget_both_ways 53 4 1 2 "55.5 MiB > 53.0 MiB" peak_bounded
budget_both_ways 45 4 2 3 "49.5 MiB > 45.0 MiB" peak_bounded
check "a pipeline rank fails: every rank ends, with the message" nonzero "rank 3 .*injected failure" -- \
  "${MPIRUN[@]}" -np 4 -x AXONN_FAIL_RANK=3 -x AXONN_FAIL_STEP=1 "$AXRUN" --plan "$T/pipe.json" --steps 50 \
  --measure "$T/m_fail.json"

check "one rank fails: every rank ends, with the message" nonzero "rank 1 .*injected failure" -- \
  "${MPIRUN[@]}" -np 4 -x AXONN_FAIL_RANK=1 -x AXONN_FAIL_STEP=1 "$AXRUN" --plan "$T/p4.json" --steps 50 --measure "$T/m3.json"

# Sharded initialization: gpt-bench on 8 ranks with Gz = 8 builds its stage with a peak
# of at most a quarter of the serial model's parameter bytes per rank (every rank used
# to build the whole serial model first).
"$AXPLAN" plan --model gpt-bench --topology perlmutter --gpus 8 --batch-seqs 8 --grid 1,1,8,1,1 --precision fp32 \
  --output "$T/gz8.json" >/dev/null
check "gpt-bench on 8 ranks, Gz = 8" 0 "initialization peak" -- "${MPIRUN[@]}" -np 8 "$AXRUN" --plan "$T/gz8.json" --steps 1
init_pct=$(grep -oE "initialization peak .*\([0-9.]+%\)" "$T/out" | grep -oE "[0-9.]+%" | tr -d %)
if [ -n "$init_pct" ] && awk -v p="$init_pct" 'BEGIN { exit !(p <= 25) }'; then
  passes=$((passes + 1)); echo "PASS sharded initialization: $(grep -oE "initialization peak .*" "$T/out")"
else
  fails=$((fails + 1)); echo "FAIL sharded initialization peak: ${init_pct:-none}% of the serial parameters"
fi

# Checkpoints (docs/runtime.md): 3 steps, save, resume to 6 prints the straight run's
# losses; resumed on another grid with ZeRO-1 they follow within 1e-5; through a serial
# state dict (axckpt) too; a rank killed by SIGKILL ends the job within 30 s, and the
# run resumes from the last complete checkpoint; a save killed before its completion
# marker is never loaded.
AXCKPT="$(dirname "$AXRUN")/axckpt"
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 2 --batch-seqs 8 --grid 1,1,1,2,1 --precision fp32 \
  --output "$T/dp2.json" >/dev/null
ckpt_run() {  # ckpt_run NAME NP PLAN PATTERN [AXRUN FLAGS...]
  local name=$1 np=$2 plan=$3 pattern=$4
  shift 4
  check "$name" 0 "$pattern" -- "${MPIRUN[@]}" -np "$np" "$AXRUN" --plan "$plan" --seed 5 --log-every 1 "$@"
}
last_losses() { losses "$T/out" | tail -n "$1"; }
same_tail() {  # same_tail NAME N: the last run printed the straight run's last N losses
  if [ "$(last_losses "$2")" = "$(tail -n "$2" "$T/straight.losses")" ]; then
    passes=$((passes + 1)); echo "PASS $1 prints the straight run's losses: $(last_losses "$2" | tr '\n' ' ')"
  else
    fails=$((fails + 1)); echo "FAIL $1 losses differ"; paste <(tail -n "$2" "$T/straight.losses") <(last_losses "$2")
  fi
}
ckpt_run "straight 6 steps" 4 "$T/pipe.json" "step +6/6" --steps 6 --measure "$T/m_straight.json"
losses "$T/out" >"$T/straight.losses"
ckpt_run "3 steps, saved" 4 "$T/pipe.json" "step +3/3" --steps 3 --save "$T/ck" --save-every 3
ckpt_run "resumed to 6" 4 "$T/pipe.json" "resumed from .*step-00000003" --steps 6 --resume "$T/ck"
same_tail "the resumed run" 3
# Sequence parallelism: its checkpoint resumes under another sequence group, and the
# pipeline's under a sequence plan.
ckpt_run "sequence 2, 3 steps, saved" 4 "$T/seq.json" "step +3/3" --steps 3 --save "$T/ck_seq"
ckpt_run "its checkpoint resumed over a sequence group of 4" 4 "$T/seq4.json" "resumed from" --steps 6 --resume "$T/ck_seq"
same_tail "sequence 2 resumed as sequence 4" 3
ckpt_run "the pipeline's checkpoint resumed by sequence 2" 4 "$T/seq.json" "resumed from" --steps 6 --resume "$T/ck"
same_tail "the pipeline resumed as sequence 2" 3
ckpt_run "the pipeline's checkpoint resumed by 2d" 4 "$T/twod.json" "resumed from" --steps 6 --resume "$T/ck"
same_tail "the pipeline resumed as 2d" 3
# Colossal-AI's 3D loads and saves the shared layout: the pipeline's checkpoint resumed
# on the 2 x 2 x 2 cube, and the cube's own checkpoint resumed by the pipeline.
ckpt_run "the pipeline's checkpoint resumed by 3d" 8 "$T/cube.json" "resumed from" --steps 6 --resume "$T/ck"
same_tail "the pipeline resumed as 3d" 3
ckpt_run "3d, 3 steps, saved" 8 "$T/cube.json" "step +3/3" --steps 3 --save "$T/ck_cube"
ckpt_run "the cube's checkpoint resumed by the pipeline" 4 "$T/pipe.json" "resumed from" --steps 6 --resume "$T/ck_cube"
same_tail "3d resumed as the pipeline" 3
ckpt_run "resumed on another grid with ZeRO-1" 2 "$T/dp2.json" "re-sliced" --steps 6 --resume "$T/ck" --zero 1 \
  --measure "$T/m_resliced.json"
follows=$(python3 - "$T/m_straight.json" "$T/m_resliced.json" <<'PY'
import json, sys
a = {s["step"]: s["loss"] for s in json.load(open(sys.argv[1]))["steps"]}
b = {s["step"]: s["loss"] for s in json.load(open(sys.argv[2]))["steps"]}
worst = max(abs(b[k] - a[k]) / abs(a[k]) for k in b)
print(("ok" if sorted(b) == [3, 4, 5] and worst <= 1e-5 else "bad") + f" worst rel. err {worst:.2e} over steps {sorted(b)}")
PY
)
if [[ "$follows" == ok* ]]; then passes=$((passes + 1)); echo "PASS re-sliced resume follows the straight run (${follows#ok })"
else fails=$((fails + 1)); echo "FAIL re-sliced resume: $follows"; fi
# Across strategies: the 4D pipeline's checkpoint resumed by L2L (4 replicas), and an L2L
# checkpoint resumed by the 4D pipeline.
ckpt_run "the pipeline's checkpoint resumed by L2L" 4 "$T/l2l.json" "re-sliced" --steps 6 --resume "$T/ck"
same_tail "L2L resumed from the pipeline's checkpoint" 3
ckpt_run "L2L, 3 steps, saved" 4 "$T/l2l.json" "step +3/3" --steps 3 --save "$T/ck_l2l"
ckpt_run "L2L's checkpoint resumed by the pipeline" 4 "$T/pipe.json" "re-sliced" --steps 6 --resume "$T/ck_l2l"
same_tail "the pipeline resumed from L2L's checkpoint" 3
check "a checkpoint to a serial state dict" 0 "step 3" -- "$AXCKPT" to-serial "$T/ck" -o "$T/state.pt"
check "a serial state dict to a checkpoint" 0 "step-00000003" -- "$AXCKPT" from-serial "$T/state.pt" -o "$T/ser"
ckpt_run "resumed from the serial state dict on 1 rank" 1 "$T/one.json" "resumed from" --steps 6 --resume "$T/ser"
same_tail "the serial round trip" 3
check "--resume without a checkpoint" 2 "no complete checkpoint" -- "$AXRUN" --plan "$T/one.json" --resume "$T/nothing"
check "--resume with another seed" 2 "seed 6 differs from the checkpoint's 5" -- \
  "$AXRUN" --plan "$T/one.json" --resume "$T/ser" --seed 6 --steps 6
check "--resume with other data" 2 "data \(text, [0-9]+ bytes, fnv1a64 [0-9a-f]{16}\) differs from the checkpoint's \(synthetic\).*manifest.json: /data" -- \
  "$AXRUN" --plan "$T/one.json" --resume "$T/ck" --seed 5 --steps 6 --data /usr/share/common-licenses/GPL-3
# SIGKILL: rank 1 dies at step 4 (0-based 3), after the checkpoint of step 2.
start=$SECONDS
timeout 120 "${MPIRUN[@]}" -np 4 -x AXONN_KILL_RANK=1 -x AXONN_KILL_STEP=3 "$AXRUN" --plan "$T/pipe.json" --seed 5 \
  --steps 6 --save "$T/kk" --save-every 2 >"$T/out" 2>&1
rc=$? took=$((SECONDS - start))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 30 ] && grep -q "signal 9" "$T/out"; then
  passes=$((passes + 1)); echo "PASS a rank killed by SIGKILL ends every rank (rc $rc, ${took}s)"
else
  fails=$((fails + 1)); echo "FAIL SIGKILL (rc $rc, ${took}s)"; tail -20 "$T/out"
fi
# A rank that hangs (sleeps forever at step 3): the others' watchdog ends the job,
# naming the operation and its group.
start=$SECONDS
timeout 120 "${MPIRUN[@]}" -np 4 -x AXONN_HANG_RANK=2 -x AXONN_HANG_STEP=2 "$AXRUN" --plan "$T/pipe.json" --seed 5 \
  --steps 6 --collective-timeout 3 >"$T/out" 2>&1
rc=$? took=$((SECONDS - start))
if [ $rc -eq 3 ] && [ $took -le 30 ] && grep -qE "did not complete within 3.0 s of being issued" "$T/out" &&
  grep -qE "world ranks [0-9, ]*2" "$T/out"; then
  passes=$((passes + 1)); echo "PASS a hanging rank is caught by the watchdog (rc $rc, ${took}s): $(grep -m1 -oE "[a-z_]+ on communicator .*issued" "$T/out")"
else
  fails=$((fails + 1)); echo "FAIL hanging rank (rc $rc, ${took}s)"; tail -20 "$T/out"
fi
ckpt_run "resumed after the kill" 4 "$T/pipe.json" "resumed from .*step-00000002" --steps 6 --resume "$T/kk"
same_tail "the run resumed after the kill" 4
check "a save killed before its marker" nonzero "signal 9" -- "${MPIRUN[@]}" -np 4 -x AXONN_KILL_IN_CHECKPOINT=4 \
  "$AXRUN" --plan "$T/pipe.json" --seed 5 --steps 6 --save "$T/kc" --save-every 2
if [ -f "$T/kc/step-00000004/manifest.json" ] && [ ! -f "$T/kc/step-00000004/COMPLETE" ]; then
  passes=$((passes + 1)); echo "PASS the interrupted save left step 4 without its marker"
else
  fails=$((fails + 1)); echo "FAIL interrupted save: $(ls -R "$T/kc" | tr '\n' ' ')"
fi
ckpt_run "the interrupted save is skipped" 4 "$T/pipe.json" "resumed from .*step-00000002" --steps 6 --resume "$T/kc"
same_tail "the run resumed past the interrupted save" 4

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
