#!/usr/bin/env bash
# axplan validate: bad input exits 2 with a message naming what is wrong (no MPI
# launcher, launcher not found, topology not matching --gpus); a configuration that
# fails is recorded as failed and the sweep goes on to measure the others (the
# pipeline grid included) and write the report, the summary and two well-formed SVG
# plots; with --tensor-mode all, every mode is run and has its statistics; with
# --repeats, each configuration runs in rounds and its spread, noise floor and scatter
# ceiling are reported; a step that took no time fails its configuration; --rescore
# scores a report's measurements under another topology; compare-sweeps scores one
# sweep against another (the stored 2x4 and 4x2 reruns) and refuses unlike sweeps;
# calibration-swap agrees with --rescore under the swapped topologies.
#   validate_test.sh AXPLAN AXRUN MPIRUN LAUNCHER_SCRIPT
set -uo pipefail
AXPLAN=$1 AXRUN=$2 MPIRUN_BIN=$3 LAUNCHER=$4
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); echo "PASS $1"; }
bad() { fails=$((fails + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/out" | tail -20; }

# Two single-GPU nodes: every grid of 2 GPUs crosses the (slower) inter-node link.
cat >"$T/two.json" <<JSON
{"name": "two-nodes", "gpus_per_node": 1, "num_nodes": 2, "gpu_memory_bytes": 8589934592,
 "peak_flops_per_s": 1e10, "intra_node_bandwidth_bytes_per_s": 1e9, "inter_node_bandwidth_bytes_per_s": 1e8}
JSON
common=(validate --model gpt-tiny --batch-seqs 2 --steps 2 --axrun "$AXRUN")

env PATH=/nonexistent "$AXPLAN" "${common[@]}" --topology "$T/two.json" --gpus 2 --launcher "$LAUNCHER" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "no MPI launcher on PATH" "$T/out" && ok "no MPI: exit 2" || bad "no MPI (rc $rc)"

"$AXPLAN" "${common[@]}" --topology "$T/two.json" --gpus 2 --launcher "/nonexistent/mpirun -np 2" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "launcher program '/nonexistent/mpirun' not found" "$T/out" && ok "missing launcher: exit 2" \
  || bad "missing launcher (rc $rc)"

"$AXPLAN" "${common[@]}" --topology "$T/two.json" --gpus 4 --launcher "$LAUNCHER" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "differs from the topology's 2 nodes x 1 GPUs = 2" "$T/out" && ok "mismatched topology: exit 2" \
  || bad "mismatched topology (rc $rc)"

timeout 300 "$AXPLAN" "${common[@]}" --topology "$T/two.json" --gpus 2 --launcher "$LAUNCHER $MPIRUN_BIN --" \
  --out-dir "$T/report" --timeout 120 >"$T/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/report" <<'PY'
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
by = {c["name"]: c for c in r["configs"]}
failed = [c for c in r["configs"] if c["status"] == "failed"]
measured = [c for c in r["configs"] if c["status"] == "measured"]
assert [c["name"] for c in failed] == ["1x1x2x1x1"], failed
assert "injected failure" in failed[0]["reason"], failed[0]["reason"]
assert sorted(c["name"] for c in measured) == ["1x1x1x1x2", "1x1x1x2x1", "1x2x1x1x1", "2x1x1x1x1"], \
    [c["name"] for c in measured]  # the pipeline grid runs too
assert r["statistics"]["pipelines_measured"] == 1
assert all(c["measured_batch_s"] > 0 and len(c["measured_steps_s"]) == 2 for c in measured)
s = r["statistics"]["placement_aware"]
assert -1 <= s["spearman"] <= 1 and 1 <= s["measured_best_predicted_rank"] <= len(measured) and s["mape"] >= 0
assert "1x1x2x1x1" in open(d + "/summary.md").read()
# Each measured run's wait policy, as axrun recorded it (the failed run wrote none).
w = r["wait_policies"]
assert set(w) <= {"sleep", "yield"} and sum(w.values()) == len(measured), w
assert "Waiting ranks (axrun `--wait`" in open(d + "/summary.md").read()
# The model counts rank 0's small collectives on each grid, the pipeline's loss included.
for c in measured:
    small = c["comm_by_term"]["small"]
    assert small["predicted_calls"] == small["measured_calls"] > 0, (c["name"], small)
for f in ("fig7.svg", "predicted_vs_measured.svg"):
    assert ET.parse(d + "/" + f).getroot().tag.endswith("svg")
PY
then ok "a failing configuration is recorded and the sweep goes on"; else bad "sweep with a failing configuration (rc $rc)"; fi
# --tensor-mode all on 4 ranks (2 nodes of 2), at overlap level 0 (where the error's
# parts are separable): the top 2 of each mode run (the 2d grid 1,2,2 being 2d's only
# one), and the report gives statistics per mode, per collective and per part.
cat >"$T/four.json" <<JSON
{"name": "four", "gpus_per_node": 2, "num_nodes": 2, "gpu_memory_bytes": 8589934592,
 "peak_flops_per_s": 1e10, "intra_node_bandwidth_bytes_per_s": 1e9, "inter_node_bandwidth_bytes_per_s": 1e8}
JSON
timeout 300 "$AXPLAN" validate --model gpt-tiny --batch-seqs 4 --steps 2 --axrun "$AXRUN" --topology "$T/four.json" \
  --gpus 4 --tensor-mode all --top 2 --overlap-level 0 --launcher "$MPIRUN_BIN --oversubscribe --allow-run-as-root -np 4" \
  --out-dir "$T/modes" --timeout 120 >"$T/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/modes" <<'PY'
import collections, json, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
assert r["tensor_modes"] == "all" and r["overlap_level"] == 0
measured = [c for c in r["configs"] if c["status"] == "measured"]
failed = [c["name"] + ": " + c.get("reason", "") for c in r["configs"] if c["status"] == "failed"]
assert not failed, failed
count = collections.Counter(c["tensor_mode"] for c in measured)
assert count == {"axonn3d": 2, "1d": 2, "sequence": 2, "2d": 1, "2d-broadcast": 1}, count
assert any(c["name"] == "2d-1x2x2x1x1" and c["grid"]["layout"] == "2d" for c in measured), [c["name"] for c in measured]
assert all(c["name"].startswith("seq") and c["grid"]["sequence"] > 1 for c in measured if c["tensor_mode"] == "sequence")
per = {m["tensor_mode"]: m for m in r["statistics"]["per_tensor_mode"]}
assert set(per) == set(count), per
for mode, m in per.items():
    assert m["measured"] == count[mode]
    a = m["placement_aware"]
    assert a["mape"] >= 0
    assert ("spearman" in a) == (count[mode] >= 2), (mode, a)
    if count[mode] >= 2:
        assert -1 <= a["spearman"] <= 1 and 1 <= a["measured_best_predicted_rank"] <= 2 and 0 <= a["top5_overlap"] <= 1
md = open(d + "/summary.md").read()
assert "Per tensor mode" in md and "| 2d | 1 |" in md, md
# Per collective: every kind axrun recorded maps to a term (none unknown); a tensor
# group's collectives are measured and predicted under the same term.
for c in measured:
    t = c["comm_by_term"]
    assert "unknown" not in t, (c["name"], t)
    g = c["grid"]
    if c["tensor_mode"] == "2d":
        assert t["act_y"]["measured_busy_s"] > 0 and t["act_y"]["predicted_s"] > 0, (c["name"], t)
    elif c["tensor_mode"] == "2d-broadcast":
        # SUMMA's moves: their waits against the exposed moves, no more than the moves in full
        s, p = t["summa"], c["predicted"]["placement_aware"]
        assert s["measured_busy_s"] > 0 and 0 < s["predicted_s"] == p["summa_exposed_s"] < p["summa_s"], (c["name"], t, p)
    elif g["gx"] > 1 or g["gy"] > 1:
        term = "ar_x" if g["gx"] > 1 else "ar_y"
        assert t[term]["measured_busy_s"] > 0 and t[term]["predicted_s"] > 0, (c["name"], t)
assert "Per collective" in md and "| small |" in md, md
# The model counts the small collectives (layer norms, the loss, vectors) that rank 0 issues, in every mode.
small = [c for c in measured if "small" in c["comm_by_term"]]
assert small, "no configuration with small collectives"
for c in small:
    s = c["comm_by_term"]["small"]
    assert s["predicted_calls"] == s["measured_calls"] and s["predicted_s"] > 0, (c["name"], s)
# Where the error comes from: each configuration's parts sum to its error; the budget's
# mean shares sum to the mean signed error.
shares = []
for c in measured:
    parts = c["error_parts"]
    error = c["measured_batch_s"] - c["predicted"]["placement_aware"]["batch_s"]
    assert abs(sum(p["measured_s"] - p["predicted_s"] for p in parts.values()) - error) < 1e-9, (c["name"], parts)
    # In every mode the rest of the step holds the products: 2d-broadcast's moves, issued a
    # step ahead, count by their waits, not by spans that cover the products.
    assert parts["compute"]["measured_s"] > 0, (c["name"], parts)
    if c["grid"]["ginter"] > 1:
        assert parts["pipeline_wait"]["measured_s"] > 0, (c["name"], parts)
    for term, p in parts.items():  # a measured collective was called; the rest are not collectives
        assert (p["calls"] >= 1) == (term not in ("compute", "pipeline_wait") and p["measured_s"] > 0), (term, p)
    shares.append(error / c["measured_batch_s"])
budget = r["statistics"]["error_budget"]
assert abs(sum(b["mean_error_share"] for b in budget) - sum(shares) / len(shares)) < 1e-9, budget
assert budget[0]["mean_abs_error_share"] == max(b["mean_abs_error_share"] for b in budget), budget
assert "Most of the remaining error: `" + budget[0]["part"] + "`" in md and "excess per call (ms)" in md, md
PY
then ok "--tensor-mode all: every mode measured, statistics per mode and per collective"; else bad "--tensor-mode all (rc $rc)"; fi

# --rescore: the modes sweep scored again without running anything. Under its own
# topology every figure is the same; under one with a sync wait (docs/model.md section
# 8) the measurements are the same and the tensor-parallel predictions grow. With a
# flag the report fixes, or a report that is not one, it exits 2.
python3 - "$T/four.json" "$T/four-sync.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); t["sync_wait"] = [{"ranks": 2, "fraction": 0.5}]
json.dump(t, open(sys.argv[2], "w"))
PY
"$AXPLAN" validate --rescore "$T/modes/report.json" --topology "$T/four.json" --out-dir "$T/same" >"$T/out" 2>&1; rc1=$?
"$AXPLAN" validate --rescore "$T/modes/report.json" --topology "$T/four-sync.json" --out-dir "$T/sync" >>"$T/out" 2>&1; rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && python3 - "$T/modes/report.json" "$T/same/report.json" "$T/sync/report.json" <<'PY'
import json, sys
old, same, sync = (json.load(open(f)) for f in sys.argv[1:])
measured = lambda r: {c["name"]: c for c in r["configs"] if c["status"] == "measured"}
assert measured(same).keys() == measured(old).keys() == measured(sync).keys()
assert same["statistics"] == old["statistics"], (same["statistics"], old["statistics"])
for name, c in measured(sync).items():
    o = measured(old)[name]
    assert c["measured_runs_s"] == o["measured_runs_s"], name
    for term, t in o["comm_by_term"].items():  # the measured busy seconds carried over
        assert t["measured_busy_s"] is None or c["comm_by_term"][term]["measured_busy_s"] == t["measured_busy_s"], term
    p, q = c["predicted"]["placement_aware"]["batch_s"], o["predicted"]["placement_aware"]["batch_s"]
    tensor = c["grid"]["gx"] * c["grid"]["gy"] * c["grid"]["gz"] * c["grid"].get("sequence", 1) > 1
    assert (p > q) if tensor else (p == q), (name, p, q)
    assert ("sync_wait" in c["error_parts"]) == tensor, (name, c["error_parts"])
assert sync["statistics"]["placement_aware"]["mape"] != old["statistics"]["placement_aware"]["mape"]
PY
then ok "--rescore: the same figures under the same topology, new predictions under a new one"
else bad "--rescore (rc $rc1, $rc2)"; fi
"$AXPLAN" validate --rescore "$T/modes/report.json" --topology "$T/four.json" --gpus 4 --out-dir "$T/x" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "excludes" "$T/out" && ok "--rescore with --gpus: exit 2" || bad "--rescore with --gpus (rc $rc)"
"$AXPLAN" validate --rescore "$T/four.json" --topology "$T/four.json" --out-dir "$T/x" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "four.json" "$T/out" && grep -q "model" "$T/out" && ok "--rescore of a non-report: exit 2" \
  || bad "--rescore of a non-report (rc $rc)"

# A sweep's precision (validate --precision; the report keeps it and --rescore reads it
# back): a bf16 sweep is predicted with the topology's compute_bf16, an fp32 sweep with
# compute. The 4-rank report above, rescored as fp32 and as bf16 under two topologies
# that differ only in compute_bf16 (4 times compute's matmul rate).
python3 - "$T" <<'PY'
import json, sys
d = sys.argv[1]
t = json.load(open(d + "/four.json")); t["compute"] = {"matmul_flops_per_s": 1e9}
json.dump(t, open(d + "/four-fp32.json", "w"))
t["compute_bf16"] = {"matmul_flops_per_s": 4e9}
json.dump(t, open(d + "/four-bf16.json", "w"))
r = json.load(open(d + "/modes/report.json")); r["precision"] = "bf16"
json.dump(r, open(d + "/modes-bf16.json", "w"))
PY
rc=0
for run in "modes/report.json:fp32" "modes-bf16.json:bf16"; do
  for topo in fp32 bf16; do
    "$AXPLAN" validate --rescore "$T/${run%%:*}" --topology "$T/four-$topo.json" --out-dir "$T/p-${run##*:}-$topo" >"$T/out" 2>&1 || rc=1
  done
done
if [ $rc -eq 0 ] && python3 - "$T" <<'PY'
import json, sys
d = sys.argv[1]
pred = lambda run, topo: {c["name"]: c["predicted"]["placement_aware"]["batch_s"]
                          for c in json.load(open(f"{d}/p-{run}-{topo}/report.json"))["configs"] if c["status"] == "measured"}
assert json.load(open(f"{d}/p-bf16-bf16/report.json"))["precision"] == "bf16"
assert "mixed precision (bf16)" in open(f"{d}/p-bf16-bf16/summary.md").read()
assert pred("fp32", "fp32") == pred("fp32", "bf16")  # compute_bf16 is not an fp32 plan's
fast, slow = pred("bf16", "bf16"), pred("bf16", "fp32")
assert fast.keys() == slow.keys() and all(fast[n] < slow[n] for n in fast), (fast, slow)
PY
then ok "--precision bf16: kept in the report, predicted with compute_bf16 (fp32 sweeps without it)"
else bad "--precision bf16 rescored (rc $rc)"; fi
"$AXPLAN" validate --rescore "$T/modes/report.json" --topology "$T/four.json" --precision bf16 --out-dir "$T/x" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "excludes" "$T/out" && ok "--rescore with --precision: exit 2" || bad "--rescore with --precision (rc $rc)"

# --repeats 2 with --search-order on the 2 nodes of 2: the top 3 run twice each, in
# rounds; each has its two runs and their spread, the statistics the median spread, the
# report the machine's load, each plan the order the search kept. With --kernel-probes
# on a topology whose kernels calibrate --kernels-only timed: a probe before the sweep
# and after each round, each over every kernel of the table.
timeout 120 "$MPIRUN_BIN" --oversubscribe --allow-run-as-root --bind-to none -np 4 "$AXPLAN" calibrate --kernels-only \
  --gpus-per-node 2 --model gpt-tiny --batch-seqs 4 --base "$T/four.json" --name four -o "$T/four-kernels.json" >"$T/out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^kernels only: collectives, point-to-point and sync waits not measured" "$T/out" \
  && python3 -c "import json, sys; t = json.load(open(sys.argv[1])); assert t['inter_node_bandwidth_bytes_per_s'] == 1e8 and len(t['compute']['matmul_table']) > 0" "$T/four-kernels.json" \
  && ok "calibrate --kernels-only: the kernels timed, the base's collectives kept" || bad "calibrate --kernels-only (rc $rc)"
timeout 300 "$AXPLAN" validate --model gpt-tiny --batch-seqs 4 --steps 2 --axrun "$AXRUN" --topology "$T/four-kernels.json" \
  --gpus 4 --top 3 --repeats 2 --search-order --kernel-probes \
  --launcher "$MPIRUN_BIN --oversubscribe --allow-run-as-root --bind-to none -np 4" \
  --out-dir "$T/repeats" --timeout 120 >"$T/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q " 6/6 " "$T/out" && python3 - "$T/repeats" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
r = json.load(open(d + "/report.json"))
assert r["repeats"] == 2
measured = [c for c in r["configs"] if c["status"] == "measured"]
assert len(measured) == 3, [c["name"] for c in measured]
for c in measured:
    runs = c["measured_runs_s"]
    assert len(runs) == 2 and len(c["measured_steps_s"]) == 4, c
    assert abs(c["run_spread"] - (max(runs) - min(runs)) / (sum(runs) / 2)) < 1e-12, c
    assert sorted(runs)[0] <= c["measured_batch_s"] <= sorted(runs)[1]
spreads = sorted(c["run_spread"] for c in measured)
assert abs(r["statistics"]["median_run_spread"] - spreads[1]) < 1e-12
# the MAPE from the runs' scatter alone: for two runs |a - b| / 2 over their mean, averaged
floor = sum(abs(a - b) / 2 / ((a + b) / 2) for a, b in (c["measured_runs_s"] for c in measured)) / len(measured)
assert abs(r["statistics"]["noise_floor_mape"] - floor) < 1e-12, (r["statistics"]["noise_floor_mape"], floor)
load = r["machine_load"]["before"]
assert load["cores"] >= 1 and load["one_min"] >= 0, load
orders = [[a["name"] for a in json.load(open(p))["mesh"]] for p in glob.glob(d + "/runs/*.plan.json")]
assert len(orders) == 3 and all(sorted(o) == ["data", "pipe", "x", "y", "z"] for o in orders), orders
assert len(glob.glob(d + "/runs/*.run2.log")) == 3
# the scatter ceiling: the relative variance pooled over the configurations (two runs:
# s^2 = (a - b)^2 / 2), and statistics an exact model can reach, within their ranges
ceiling = r["statistics"]["scatter_ceiling"]
pooled = sum((a - b) ** 2 / 2 / ((a + b) / 2) ** 2 for a, b in (c["measured_runs_s"] for c in measured)) / len(measured)
import math
assert ceiling["configurations"] == 3 and ceiling["draws"] == 4000, ceiling
assert abs(ceiling["relative_sigma"] - pooled ** 0.5) < 1e-12, (ceiling, pooled ** 0.5)
# three configurations: the top 5 is all of them; the mean error of a log-normal 2-run
# mean, m = t exp(x) with x ~ N(0, s^2), s = sigma / sqrt(2), is E|1 - exp(-x)| =
# exp(s^2 / 2) erf(s / sqrt(2)) (closed form, within the simulation's few percent)
assert ceiling["top5_overlap"] == 1.0, ceiling
s = (pooled / 2) ** 0.5
expected_mape = math.exp(s * s / 2) * math.erf(s / math.sqrt(2))
assert abs(ceiling["mape"] - expected_mape) < 0.05 * expected_mape, (ceiling, expected_mape)
assert -1 <= ceiling["spearman"] <= 1 and 0 <= ceiling["best_first"] <= 1 and 0 <= ceiling["shrinkage"] <= 1, ceiling
assert ceiling["meets_all"] <= min(ceiling["meets_mape"], ceiling["meets_spearman"], ceiling["best_first"]), ceiling
md = open(d + "/summary.md").read()
assert "ran 2 times" in md and "run-to-run spread" in md and "scatter alone" in md and "load average" in md, md
assert "exact in expectation would reach" in md, md
# the kernel probes: before the sweep and after each of the 2 rounds, over every kernel of the table
table = json.load(open(os.path.dirname(d.rstrip("/")) + "/four-kernels.json"))["compute"]
probes = r["kernel_probes"]
assert [p["when"] for p in probes] == ["before the sweep", "after round 1", "after round 2"], probes
for p in probes:
    assert "failed" not in p, p
    assert p["matmul_shapes"] == len(table["matmul_table"]) and p["elementwise_operations"] == len(table["elementwise_s_per_element"]), p
    assert 0.1 < p["matmul_ratio"] < 10 and 0.1 < p["elementwise_ratio"] < 10, p
assert len(glob.glob(d + "/runs/kernel-probe-*.json")) == 3
assert "Kernel probes" in md and "after round 2: matmuls" in md, md
PY
then ok "--repeats 2: two runs each, their spread, the MAPE from their scatter, its ceiling, the machine's load and kernel probes"; else bad "--repeats (rc $rc)"; fi
# A measurement whose step took no time is refused: the configuration fails with the
# step named, the sweep goes on (a launcher that writes such a measurement, runs nothing).
cat >"$T/zero_launcher.sh" <<'SH'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do [ "$1" = "--measure" ] && m=$2; shift; done
echo '{"steps": [{"batch_s": 0.5}, {"batch_s": 0.0}]}' >"$m"
SH
chmod +x "$T/zero_launcher.sh"
"$AXPLAN" "${common[@]}" --topology "$T/two.json" --gpus 2 --top 1 --launcher "$T/zero_launcher.sh" \
  --kernel-probes --out-dir "$T/zero" >"$T/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && python3 - "$T/zero/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
failed = [c for c in r["configs"] if c["status"] == "failed"]
assert len(failed) == 1 and "step 2 of" in failed[0]["reason"] and "took 0 s" in failed[0]["reason"], failed
# the launcher runs no probe either: both are recorded as failed, with the reason
probes = r["kernel_probes"]
assert [p["when"] for p in probes] == ["before the sweep", "after round 1"] and all(p["failed"] for p in probes), probes
PY
then ok "a step that took no time: the configuration fails, naming the step; failed probes recorded"; else bad "a step that took no time (rc $rc)"; fi
# compare-sweeps: a sweep against itself agrees exactly.
"$AXPLAN" compare-sweeps "$T/repeats/report.json" "$T/repeats/report.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 0 ] && grep -q "| batch-time MAPE | 0.0% |" "$T/out" && grep -q "| Spearman rank correlation | 1.000 |" "$T/out" \
  && grep -q "| top-5 overlap | 1.00 |" "$T/out" && grep -q "| B's measured best, ranked by A | 1 |" "$T/out" \
  && ok "compare-sweeps: a sweep agrees with itself" || bad "compare-sweeps of a sweep with itself (rc $rc)"
# The stored 2x4 and 4x2 sweeps of 2026-11-27, each run twice with the same axrun
# (docs/validation.md, "What the scatter allows"): the figures a Python reading of the
# two reports gives (MAPE |A - B| / B; B's fastest by A's order; the five fastest of each).
D=$(cd "$(dirname "$0")/../../docs/validation" && pwd)
"$AXPLAN" compare-sweeps "$D/emulated-2x4-200mbit-2026-11-27-report.json" "$D/emulated-2x4-200mbit-2026-11-27-rounds-report.json" >"$T/out" 2>&1
rc1=$?; cp "$T/out" "$T/out24"
"$AXPLAN" compare-sweeps "$D/emulated-4x2-200mbit-2026-11-27-report.json" "$D/emulated-4x2-200mbit-2026-11-27-rounds-report.json" >"$T/out" 2>&1
rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q "^43 configurations measured in both" "$T/out24" \
  && grep -q "| batch-time MAPE | 6.8% |" "$T/out24" && grep -q "| Spearman rank correlation | 0.937 |" "$T/out24" \
  && grep -q "| B's measured best, ranked by A | 1 |" "$T/out24" && grep -q "| top-5 overlap | 0.20 |" "$T/out24" \
  && grep -q "| batch-time MAPE | 8.2% |" "$T/out" && grep -q "| Spearman rank correlation | 0.906 |" "$T/out" \
  && grep -q "| B's measured best, ranked by A | 14 |" "$T/out" && grep -q "| top-5 overlap | 0.40 |" "$T/out" \
  && grep -q "^| 16 | " "$T/out"
then ok "compare-sweeps: the stored 2x4 and 4x2 sweeps against their reruns"; else bad "compare-sweeps of the stored sweeps (rc $rc1, $rc2)"; fi
# Refused: another batch, another cluster layout (2 x 4 against 4 x 2), no configuration
# in common. A sweep run once has no ceiling: its row says so.
python3 - "$T/repeats/report.json" "$T" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
json.dump(dict(r, batch_seqs=8), open(sys.argv[2] + "/other.json", "w"))
renamed = dict(r, configs=[dict(c, name="renamed-" + c["name"]) for c in r["configs"]])
json.dump(renamed, open(sys.argv[2] + "/renamed.json", "w"))
once = dict(r, repeats=1, configs=[dict(c, measured_runs_s=c["measured_runs_s"][:1]) if c["status"] == "measured" else c
                                   for c in r["configs"]])
json.dump(once, open(sys.argv[2] + "/once.json", "w"))
PY
"$AXPLAN" compare-sweeps "$T/repeats/report.json" "$T/other.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "differ in batch_seqs: 4 in" "$T/out" && ok "compare-sweeps of different batches: exit 2" \
  || bad "compare-sweeps of different batches (rc $rc)"
"$AXPLAN" compare-sweeps "$D/emulated-2x4-200mbit-2026-11-27-report.json" "$D/emulated-4x2-200mbit-2026-11-27-report.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "differ in launcher" "$T/out" && grep -q -- "--nodes 4 --gpus-per-node 2" "$T/out" \
  && ok "compare-sweeps of two cluster layouts: exit 2" || bad "compare-sweeps of two cluster layouts (rc $rc)"
"$AXPLAN" compare-sweeps "$T/repeats/report.json" "$T/renamed.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "0 configuration(s) measured in both" "$T/out" \
  && ok "compare-sweeps with nothing in common: exit 2" || bad "compare-sweeps with nothing in common (rc $rc)"
"$AXPLAN" compare-sweeps "$T/once.json" "$T/once.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 0 ] && grep -q "once.json | 1 | - | - |" "$T/out" && ! grep -q "runs of each configuration" "$T/out" \
  && ok "compare-sweeps of sweeps run once: no ceiling" || bad "compare-sweeps of sweeps run once (rc $rc)"
"$AXPLAN" compare-sweeps "$T/repeats/report.json" "$T/missing.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "missing.json" "$T/out" && ok "compare-sweeps of a missing report: exit 2" \
  || bad "compare-sweeps of a missing report (rc $rc)"
# calibration-swap: the stored 4x2 sweep e under its calibration with each group of
# fields from sweep c's. Three rows agree with validate --rescore under the same
# topologies, built here (MAPE, Spearman, the best's rank, top-5; the move recomputed
# from the reports): its own (move 0), c's sync wait alone, c's calibration whole.
# Refused: a donor of another layout.
E="$D/emulated-4x2-200mbit-2026-12-02-sleep-e" C="$D/emulated-4x2-200mbit-2026-12-01-sleep-c"
"$AXPLAN" calibration-swap "$E-report.json" --topology "$E-topology.json" --donor "$C-topology.json" >"$T/swap" 2>&1
rc=$?
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); t['sync_wait']=json.load(open(sys.argv[2]))['sync_wait']; json.dump(t,open(sys.argv[3],'w'))" \
  "$E-topology.json" "$C-topology.json" "$T/e-sync-c.json"
for x in own:"$E-topology.json" sync:"$T/e-sync-c.json" all:"$C-topology.json"; do
  "$AXPLAN" validate --rescore "$E-report.json" --topology "${x#*:}" --out-dir "$T/swap-${x%%:*}" >/dev/null 2>&1 || rc=1
done
if [ $rc -eq 0 ] && python3 - "$T/swap" "$T" <<'PY'
import json, math, sys
out = open(sys.argv[1]).read()
def load(tag):
    r = json.load(open("%s/swap-%s/report.json" % (sys.argv[2], tag)))
    p = {c["name"]: c["predicted"]["placement_aware"]["batch_s"] for c in r["configs"] if c["status"] == "measured"}
    return p, r["statistics"]["placement_aware"]
own, own_s = load("own"); sync, sync_s = load("sync"); whole, whole_s = load("all")
def move(p): return math.sqrt(sum(math.log(p[n] / own[n]) ** 2 for n in own) / len(own))
assert move(sync) > 0.01, move(sync)  # c's sync wait does move the predictions
rows = {"none (the calibration's own)": (own, own_s), "sync wait": (sync, sync_s), "all (the other calibration)": (whole, whole_s)}
for label, (p, s) in rows.items():
    cells = "| %s | %.1f%% | %.1f%% | %.3f | %d | %.2f |" % (label, 100 * move(p), 100 * s["mape"], s["spearman"],
                                                         s["measured_best_predicted_rank"], s["top5_overlap"])
    assert cells in out, (label, cells)
assert sum(l.startswith("| ") for l in out.splitlines()) == 1 + 8, out  # the header and 8 rows
PY
then ok "calibration-swap: each row as validate --rescore under the swapped topology"; else bad "calibration-swap (rc $rc)"; fi
# The report carries each prediction's lent-core speedup: under e's own calibration (time-
# sliced ranks, a measured waiting share) the pipelines' equal axplan explain's, and
# the grids without a pipeline have none (1).
lent_ok=1
for grid in $(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(' '.join(','.join(str(c['grid'][k]) for k in ('gx', 'gy', 'gz', 'gdata', 'ginter'))
               for c in r['configs'] if c['status'] == 'measured' and '-' not in c['name'] and c['grid']['ginter'] > 1))" \
    "$T/swap-own/report.json"); do
  x=$("$AXPLAN" explain --model gpt-bench --topology "$E-topology.json" --gpus 8 --batch-seqs 16 --overlap-level 0 --precision fp32 \
      --grid "$grid" 2>&1 | sed -n 's/.*the stages compute \([0-9.]*\)x faster.*/\1/p')
  python3 - "$T/swap-own/report.json" "$grid" "$x" <<'PY' || lent_ok=0
import json, sys
r = json.load(open(sys.argv[1]))
name = "x".join(sys.argv[2].split(","))
c = next(c for c in r["configs"] if c["name"] == name)
assert sys.argv[3] and "%.2f" % c["predicted"]["placement_aware"]["lent_core_speedup"] == sys.argv[3], (name, sys.argv[3])
assert float(sys.argv[3]) > 1, name
assert all(c["predicted"]["placement_aware"]["lent_core_speedup"] == 1 for c in r["configs"]
           if c["status"] == "measured" and c["grid"]["ginter"] == 1)
PY
done
[ $lent_ok -eq 1 ] && [ -n "${grid:-}" ] && ok "the report's lent-core speedups are axplan explain's (the last: $grid, ${x}x)" \
  || bad "the report's lent-core speedups"
"$AXPLAN" calibration-swap "$E-report.json" --topology "$E-topology.json" \
  --donor "$D/emulated-2x4-200mbit-2026-12-01-sleep-d-topology.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "\[calibration-swap\] a calibration of 4 nodes x 2 GPUs and one of 2 x 4" "$T/out" \
  && ok "calibration-swap with a donor of another layout: exit 2" || bad "calibration-swap across layouts (rc $rc)"
# residuals: three stored 2x4 sweeps, against the same figures computed here from the
# reports (each sweep's scale; the configurations' mean residuals over the sweeps, their
# RMS and what is left beyond their standard errors); refused: two layouts, one report,
# a measured configuration without a prediction.
R1="$D/emulated-2x4-200mbit-2026-11-27-report.json" R2="$D/emulated-2x4-200mbit-2026-11-27-rounds-report.json"
R3="$D/emulated-2x4-200mbit-2026-11-27-4runs-report.json"
"$AXPLAN" residuals "$R1" "$R2" "$R3" >"$T/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/out" "$R1" "$R2" "$R3" <<'PY'
import json, math, statistics as st, sys
out = open(sys.argv[1]).read()
res = {}
for path in sys.argv[2:]:
    r = json.load(open(path))
    logs = {c["name"]: math.log(st.median(c["measured_runs_s"]) / c["predicted"]["placement_aware"]["batch_s"])
            for c in r["configs"] if c["status"] == "measured"}
    centre = st.median(logs.values())
    assert "| %.3f |" % math.exp(centre) in out, ("scale", path, math.exp(centre))
    for name, l in logs.items(): res.setdefault(name, []).append(l - centre)
kept = {n: v for n, v in res.items() if len(v) >= 2}
means = [st.mean(v) for v in kept.values()]
ses = [st.stdev(v) / math.sqrt(len(v)) for v in kept.values()]
rms = math.sqrt(st.mean(m * m for m in means)); se = math.sqrt(st.mean(e * e for e in ses))
line = "%d configurations measured by two sweeps or more" % len(kept)
assert line in out, line
assert "an RMS of **%.1f%%**" % (100 * rms) in out, rms
assert "**%.1f%%** is the model's own error" % (100 * math.sqrt(rms * rms - se * se)) in out
worst = min(kept, key=lambda n: st.mean(kept[n]))
assert "| %s | 3 | %+.1f%% |" % (worst, 100 * (math.exp(st.mean(kept[worst])) - 1)) in out, worst
PY
then ok "residuals: three stored 2x4 sweeps, the figures recomputed from the reports"; else bad "residuals of the stored sweeps (rc $rc)"; fi
"$AXPLAN" residuals "$R1" "$D/emulated-4x2-200mbit-2026-11-27-report.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "\[residuals\] the sweeps differ in launcher" "$T/out" \
  && ok "residuals of two cluster layouts: exit 2" || bad "residuals of two cluster layouts (rc $rc)"
"$AXPLAN" residuals "$R1" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "At least 2 required" "$T/out" && ok "residuals of one report: exit 2" \
  || bad "residuals of one report (rc $rc)"
python3 - "$R2" "$T/unscored.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
first = next(c for c in r["configs"] if c["status"] == "measured")
del first["predicted"]
json.dump(r, open(sys.argv[2], "w"))
PY
"$AXPLAN" residuals "$R1" "$T/unscored.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "has no prediction" "$T/out" && grep -q "placement_aware.batch_s" "$T/out" \
  && ok "residuals of a configuration without a prediction: exit 2" || bad "residuals without a prediction (rc $rc)"
# Its configurations ran in searched orders, which the report does not record: --rescore refuses it.
"$AXPLAN" validate --rescore "$T/repeats/report.json" --topology "$T/four.json" --out-dir "$T/x" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "placement orders" "$T/out" && ok "--rescore of a --search-order sweep: exit 2" \
  || bad "--rescore of a --search-order sweep (rc $rc)"

# tools/exact_part_mape.py on a hand-made report: A (no pipeline) measured 1.0 s,
# predicted 0.8; B (2 stages) measured 2.0, predicted 2.0. As predicted: (20 + 0) / 2 =
# 10.0%; compute exact: A 0.9, B 1.8 -> 10.0%; ag_z exact (and the tensor group's): A
# 0.9, B 2.1 -> 7.5%; the compute's rate: A (no speedup in the report) 1 x 0.4 / 0.5 =
# 0.80, B the model's 1.5, measured 1.5 x 1.2 / 1.0 = 1.80.
cat >"$T/parts.json" <<JSON
{"configs": [
 {"grid": {"ginter": 1}, "measured_batch_s": 1.0, "predicted": {"placement_aware": {"batch_s": 0.8}},
  "error_parts": {"compute": {"calls": 0, "measured_s": 0.5, "predicted_s": 0.4},
                  "ag_z": {"calls": 5, "measured_s": 0.5, "predicted_s": 0.4}}},
 {"grid": {"ginter": 2}, "measured_batch_s": 2.0,
  "predicted": {"placement_aware": {"batch_s": 2.0, "lent_core_speedup": 1.5}},
  "error_parts": {"compute": {"calls": 0, "measured_s": 1.0, "predicted_s": 1.2},
                  "ag_z": {"calls": 5, "measured_s": 1.0, "predicted_s": 0.9}}},
 {"grid": {"ginter": 1}, "status": "failed", "measured_batch_s": null}]}
JSON
EP="$(dirname "$0")/../../tools/exact_part_mape.py"
python3 "$EP" "$T/parts.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 0 ] && grep -q "MAPE as predicted: 10.0% (2 configurations)" "$T/out" \
  && grep -q "  ag_z exact: 7.5%" "$T/out" && grep -q "  compute exact: 10.0%" "$T/out" \
  && grep -q "the tensor group's parts and the sync wait exact: 7.5%" "$T/out" \
  && grep -q "  1 stage(s): the model's 1.00, measured 0.80 (0.80-0.80, 1 configurations)" "$T/out" \
  && grep -q "  2 stage(s): the model's 1.50, measured 1.80 (1.80-1.80, 1 configurations)" "$T/out" \
  && ok "exact_part_mape.py: a hand-made report gives the hand MAPEs" || bad "exact_part_mape.py on a hand-made report (rc $rc)"
python3 "$EP" "$T/two.json" >"$T/out" 2>&1
rc=$?; [ $rc -eq 2 ] && grep -q "two.json: 'configs'; expected a validate report.json" "$T/out" \
  && ok "exact_part_mape.py of a topology: exit 2" || bad "exact_part_mape.py of a topology (rc $rc)"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
