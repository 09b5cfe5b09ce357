#!/usr/bin/env bash
# axplan calibrate: bad input (no mpirun, ranks that do not fill nodes) exits 2 with a
# message; --model fills the matmul table and the element-wise costs; on the emulated 2 x 2 cluster at 400 Mbit/s (50 MB/s) it recovers the
# inter-node rate (at most 15% above it, at most 30% below: 4 ranks on 2 cores fitted
# 38.3-46.8 MB/s in 16 runs on 2026-12-02, with the emulator script before and after that
# day's changes, 11 of them more than 15% low) and measures the latency inside a node and across nodes. Usage: calibrate_test.sh AXPLAN CLUSTER_SCRIPT MPIRUN
set -uo pipefail
AXPLAN=$1 CLUSTER=$2 MPIRUN_BIN=$3
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); echo "PASS $1"; }
bad() { fails=$((fails + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/out" | tail -15; }

timeout 60 "$AXPLAN" calibrate --gpus-per-node 2 -o "$T/a.json" >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "at least 2 ranks" "$T/out" && ok "without mpirun: exit 2" || bad "without mpirun (rc $rc)"
timeout 60 "$AXPLAN" calibrate --gpus-per-node 2 --sync-wait-rounds 0 -o "$T/a.json" >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "sync-wait-rounds" "$T/out" && ok "--sync-wait-rounds 0: exit 2 naming the option" || bad "--sync-wait-rounds 0 (rc $rc)"
timeout 60 "$AXPLAN" calibrate --gpus-per-node 2 --wait spin -o "$T/a.json" >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q -- "--wait" "$T/out" && ok "--wait spin: exit 2 naming the option" || bad "--wait spin (rc $rc)"
timeout 60 "$AXPLAN" calibrate --gpus-per-node 2 --waiting-share-rounds -1 -o "$T/a.json" >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "waiting-share-rounds" "$T/out" && ok "--waiting-share-rounds -1: exit 2 naming the option" || bad "--waiting-share-rounds -1 (rc $rc)"
timeout 60 "$AXPLAN" calibrate --gpus-per-node 2 --waiting-share-burst 0 -o "$T/a.json" >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "waiting-share-burst.*not in range" "$T/out" && ok "--waiting-share-burst 0: exit 2 naming the option and its range" || bad "--waiting-share-burst 0 (rc $rc)"
timeout 60 "$AXPLAN" calibrate --gpus-per-node 2 --sync-wait-loop -1 -o "$T/a.json" >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "sync-wait-loop.*not in range" "$T/out" && ok "--sync-wait-loop -1: exit 2 naming the option and its range" || bad "--sync-wait-loop -1 (rc $rc)"
timeout 60 "$AXPLAN" calibrate --gpus-per-node 2 --latency-rounds -1 -o "$T/a.json" >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "latency-rounds.*not in range" "$T/out" && ok "--latency-rounds -1: exit 2 naming the option and its range" || bad "--latency-rounds -1 (rc $rc)"
timeout 120 "$MPIRUN_BIN" --oversubscribe --allow-run-as-root -np 4 "$AXPLAN" calibrate --gpus-per-node 3 -o "$T/b.json" >"$T/out" 2>&1; rc=$?
grep -q "4 ranks do not fill nodes of 3 GPUs" "$T/out" && [ $rc -ne 0 ] && ok "ranks that do not fill nodes" || bad "nodes (rc $rc)"

# --model: every matmul shape of gpt-tiny on 2 GPUs is timed and lands in the table,
# with the element-wise costs and the sync wait of the group of 2 (its mean over 3 rounds, each
# fitted and printed), and the host cores per rank; the planner then uses the table (its exact entries).
# (--bind-to none: Open MPI binds each of 2 ranks to a core of its own otherwise, and the
# cores per rank checked below would be 1 on a machine with more than 2.)
timeout 300 "$MPIRUN_BIN" --oversubscribe --allow-run-as-root --bind-to none -np 2 "$AXPLAN" calibrate --gpus-per-node 1 --repeats 1 \
  --model gpt-tiny --batch-seqs 2 --matmul-repeats 1 --sync-wait-rounds 3 --waiting-share-rounds 3 --waiting-share-burst 32 -o "$T/model.json" >"$T/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && python3 - "$T/model.json" "$T/out" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["compute"]
shapes = {(e["m"], e["k"], e["n"], e["batch"]) for e in c["matmul_table"]}
# gpt-tiny fc1 (64 -> 256) forward on grid (1,2,1,1): 2 sequences * 16 tokens, k 64, n 128
assert (32, 64, 128, 1) in shapes, sorted(shapes)
assert all(e["seconds"] > 0 for e in c["matmul_table"]) and c["matmul_flops_per_s"] > 0
ops = c["elementwise_s_per_element"]
assert set(ops) == {"bias", "layer_norm", "layer_norm_split", "gelu", "residual", "softmax", "attention_layout", "cross_entropy", "adam",
                    "grad_accumulate"}, ops
assert ops["grad_accumulate"]["backward"] == 0 and ops["adam"]["backward"] == 0, ops
assert all(v["forward"] > 0 for v in ops.values())
assert ops["layer_norm_split"]["backward"] > 0, ops  # timed through its own backward, not autograd
# the same kernels timed in bf16 (mixed-precision plans' dtype): every shape and operation
h = json.load(open(sys.argv[1]))["compute_bf16"]
assert {(e["m"], e["k"], e["n"], e["batch"]) for e in h["matmul_table"]} == shapes, h["matmul_table"]
assert all(e["seconds"] > 0 for e in h["matmul_table"]) and h["matmul_flops_per_s"] > 0
assert set(h["elementwise_s_per_element"]) == set(ops) and all(v["forward"] > 0 for v in h["elementwise_s_per_element"].values())
# the sync wait of the one group of 2 (docs/model.md section 8): the mean of the 3 rounds printed
import re
w = json.load(open(sys.argv[1]))["sync_wait"]
rounds = [float(x) if x != "no fit" else 0.0 for x in re.findall(r"^  round \d: (no fit|[0-9.]+)", open(sys.argv[2]).read(), re.M)]
assert [e["ranks"] for e in w] == [2] and len(rounds) == 3, (w, rounds)
assert abs(w[0]["fraction"] - sum(rounds) / 3) < 1e-3, (w, rounds)
# the MPI backend's all-gather is a ring of its own (runtime/mpi_ring.hpp): the default,
# so the field that would say "linear" is left out (docs/model.md section 1)
assert "nonblocking_collectives" not in json.load(open(sys.argv[1]))
# the host cores per rank: both ranks on this machine, sharing the cores it lets them use
import os
cores = json.load(open(sys.argv[1]))["cores_per_rank"]
assert abs(cores - len(os.sched_getaffinity(0)) / 2) < 1e-9, (cores, len(os.sched_getaffinity(0)))
# a waiting rank's share of the cores (docs/model.md section 10): two nodes of one rank,
# so only the wait across nodes is measured, a fraction from 0 to 1, printed with its rounds
share = json.load(open(sys.argv[1]))["waiting_rank_share"]
assert list(share) == ["inter_node"] and 0 <= share["inter_node"] <= 1, share
assert re.search(r"^a rank waiting for a message from another node: takes %.2f of a computing rank's cores "
                 r"\(median of 3 rounds; rounds [0-9.]+ to [0-9.]+\)$" % share["inter_node"], open(sys.argv[2]).read(), re.M)
# calibrate waits as axrun does (--wait auto: sleep where the ranks have under a core
# each) and says so in the topology's description
policy = "sleep" if cores < 1 else "yield"
assert "(1 per node, waiting ranks %s between polls)" % policy in json.load(open(sys.argv[1]))["description"], policy
PY
then grep -q "sync wait over 2 ranks: .* (mean of 3 rounds, each burst 8 times in a row, means;" "$T/out" && [ "$(grep -cE '^  round [0-2]: ' "$T/out")" -eq 3 ] && ok "calibrate --model: matmul table, element-wise costs, sync wait" || bad "calibrate: no sync-wait lines (mean of 3 rounds, one line per round)"
  # the kernels in 3 rounds (the default) in each dtype, each round's sums printed, fp32's spread in the topology's description
  grep -q "^fp32 kernels timed in 3 rounds" "$T/out" && grep -q "^bf16 kernels timed in 3 rounds" "$T/out" \
    && [ "$(grep -cE '^  kernel round [0-2]: matmuls [0-9.]+ ms, element-wise [0-9.]+ ns/element$' "$T/out")" -eq 6 ] \
    && grep -q '"description": ".*kernels timed in 3 rounds, each kernel.s median taken; spread of the rounds. sums' "$T/model.json" \
    && ok "calibrate --model: kernels timed in 3 rounds of each dtype, their sums and spread printed and described" \
    || bad "calibrate: no kernel rounds (3 of fp32 and 3 of bf16 expected, printed and in the description)"
else bad "calibrate --model (rc $rc)"; fi
# The calibrated topology's bf16 kernels are a mixed-precision plan's (explain says so),
# and an fp32 plan is predicted from the fp32 ones: their compute parts differ (the same
# kernel times would give the same compute; the messages' halving is in the other part).
if [ -s "$T/model.json" ]; then
  bf=$("$AXPLAN" explain --model gpt-tiny --topology "$T/model.json" --gpus 2 --batch-seqs 2 --grid 1,2,1,1,1 2>&1)
  f32=$("$AXPLAN" explain --model gpt-tiny --topology "$T/model.json" --gpus 2 --batch-seqs 2 --grid 1,2,1,1,1 --precision fp32 2>&1)
  grep -q "^compute: the topology's kernels timed in bf16" <<<"$bf" && ! grep -q "^compute: the topology" <<<"$f32" \
    && [ "$(grep -o '= compute [0-9.]* s' <<<"$bf")" != "$(grep -o '= compute [0-9.]* s' <<<"$f32")" ] \
    && ok "explain: a bf16 plan computes with the bf16 kernels, an fp32 plan with the fp32 ones" \
    || bad "explain on the calibrated topology: $(grep -E '^(compute|batch time)' <<<"$bf$f32" | tr '\n' ';')"
fi
# --sync-wait-loop 0 (the default until 2026-12-02; the --model run above takes the
# default loop of 8): the bursts run after a barrier each; the written fraction is still
# the mean of the rounds' fits, one printed line per round.
timeout 300 "$MPIRUN_BIN" --oversubscribe --allow-run-as-root --bind-to none -np 2 "$AXPLAN" calibrate --gpus-per-node 1 --repeats 1 \
  --sync-wait-rounds 2 --sync-wait-loop 0 --waiting-share-rounds 0 -o "$T/loop.json" >"$T/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && python3 - "$T/loop.json" "$T/out" <<'PY'
import json, re, sys
w = json.load(open(sys.argv[1]))["sync_wait"]
rounds = [float(x) if x != "no fit" else 0.0 for x in re.findall(r"^  round \d: (no fit|[0-9.]+)", open(sys.argv[2]).read(), re.M)]
assert [e["ranks"] for e in w] == [2] and len(rounds) == 2, (w, rounds)
assert abs(w[0]["fraction"] - sum(rounds) / 2) < 1e-3, (w, rounds)
assert re.search(r"^sync wait over 2 ranks: .* \(mean of 2 rounds, each burst 1 time after a barrier each, medians;", open(sys.argv[2]).read(), re.M)
PY
then ok "calibrate --sync-wait-loop 0: the sync wait's rounds fitted and their mean written"; else bad "calibrate --sync-wait-loop 0 (rc $rc)"; fi
"$AXPLAN" calibrate --gpus-per-node 1 --model gpt-tiny >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "at least 2 ranks" "$T/out" && ok "calibrate --model without mpirun: exit 2" || bad "calibrate --model without mpirun (rc $rc)"

if [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1; then
  # One launch in about a dozen has hung on this machine (tracked in the issue notes):
  # a bounded retry, reported, instead of a 240 s stall.
  for attempt in 1 2; do
    timeout 90 bash "$CLUSTER" --nodes 2 --gpus-per-node 2 --rate 400mbit -- \
      "$AXPLAN" calibrate --gpus-per-node 2 \
      --repeats 5 --sync-wait-rounds 1 --waiting-share-rounds 3 --latency-rounds 3 -o "$T/emu.json" >"$T/out" 2>&1; rc=$?
    [ $rc -ne 124 ] && break
    echo "emulated cluster run timed out (attempt $attempt)"
  done
  bw=$(grep -o '"inter_node_bandwidth_bytes_per_s": [0-9.e+]*' "$T/emu.json" 2>/dev/null | awk '{print $2}')
  # Above the rate: a shaper that lets bursts through. Below: the ranks' TCP work
  # time-slices with their compute on 2 cores (see the header).
  if [ $rc -eq 0 ] && [ -n "$bw" ] && awk -v b="$bw" 'BEGIN { exit !(b > 0.70 * 50e6 && b < 1.15 * 50e6) }'; then
    ok "emulated cluster: inter-node bandwidth $bw bytes/s vs 50e6 configured"
  else
    bad "emulated cluster (rc $rc, inter-node $bw bytes/s vs 50e6)"
  fi
  # The 4 ranks of the 2 namespaced nodes run on this one machine (one kernel): they
  # share its cores, whatever node they are on.
  if [ $rc -eq 0 ] && python3 -c "import json, os, sys; c = json.load(open(sys.argv[1]))['cores_per_rank']; n = len(os.sched_getaffinity(0)); sys.exit(abs(c - n / 4) > 1e-9)" "$T/emu.json"; then
    ok "emulated cluster: host cores per rank = this machine's cores / 4"
  else
    bad "emulated cluster: cores_per_rank (rc $rc) is not this machine's cores / 4"
  fi
  # Two nodes of two: a rank's wait inside its node and across nodes, both measured.
  if [ $rc -eq 0 ] && python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['waiting_rank_share']; sys.exit(not (sorted(s) == ['inter_node', 'intra_node'] and all(0 <= v <= 1 for v in s.values())))" "$T/emu.json"; then
    ok "emulated cluster: a waiting rank's share of the cores, inside a node and across nodes"
  else
    bad "emulated cluster: waiting_rank_share (rc $rc) lacks a kind or is not in [0, 1]"
  fi
  # The latency rounds (docs/model.md section 1): pairs inside a node and across nodes,
  # each placement's loaded latency written (inside a node as its own field) and printed
  # with the alone figure and the rounds' range.
  if [ $rc -eq 0 ] && python3 - "$T/emu.json" "$T/out" <<'PY'
import json, re, sys
t = json.load(open(sys.argv[1])); out = open(sys.argv[2]).read()
for where, key in (("inside a node", "intra_node_collective_latency_s"), ("across nodes", "collective_latency_s")):
    m = re.search(r"^latency per ring step %s: ([0-9.]+) us beside other ranks' compute, ([0-9.]+) us alone \(pairs' "
                  r"one-element all-reduces, median of 3 rounds; loaded rounds ([0-9.]+) to ([0-9.]+) us\)$" % where, out, re.M)
    assert m, (where, out[-2000:])
    loaded, alone, low, high = map(float, m.groups())
    assert t[key] > 0 and abs(t[key] * 1e6 - loaded) < 0.1, (key, t[key], loaded)
    assert low <= loaded <= high and alone > 0, m.groups()
PY
  then
    ok "emulated cluster: the latency per ring step inside a node and across nodes, written and printed"
  else
    bad "emulated cluster: latency rounds (rc $rc) not written or printed for both placements"
  fi
else
  echo "skipped the emulated cluster part: needs root and ip netns"
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
