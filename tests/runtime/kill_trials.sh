#!/usr/bin/env bash
# Rank death, repeated (issue #14's acceptance; not in CI: about 3 minutes for 20). Each
# trial trains a 4-rank pipeline plan with a checkpoint every 2 steps and kills one rank
# (each in turn) with SIGKILL: odd trials from inside at the start of a random step
# (AXONN_KILL_RANK/STEP), even trials from outside (kill -9 of the rank's process) at a
# random moment, mid-step or mid-save. Each trial checks that
#   - the job ends within 30 s of the kill (timed from the kill: the killing rank writes
#     the time to AXONN_KILL_STAMP), with a non-zero code, mpirun naming the signal, and
#     no process of it is left;
#   - the run resumes from the newest complete checkpoint (or, with none, starts over)
#     and prints the straight run's losses for every step after it.
# Usage: kill_trials.sh AXPLAN AXRUN [TRIALS=20] ["MPIRUN FLAGS..."]
set -uo pipefail
AXPLAN=$1 AXRUN=$2 TRIALS=${3:-20}
read -r -a MPIRUN <<<"${4:-mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
STEPS=10
"$AXPLAN" plan --model gpt-tiny --topology perlmutter --gpus 4 --batch-seqs 8 --grid 1,1,2,1,2 --precision fp32 \
  --output "$T/pipe.json" >/dev/null
losses() { grep -oE "^step +[0-9]+/[0-9]+ +loss [0-9.]+" "$1" | awk '{print $2, $4}'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
"${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/pipe.json" --seed 7 --steps $STEPS --log-every 1 --measure "$T/m.json" >"$T/straight" 2>&1
losses "$T/straight" >"$T/straight.losses"
[ "$(wc -l <"$T/straight.losses")" -eq $STEPS ] || { echo "FAIL the straight run"; cat "$T/straight"; exit 1; }
ok=0
for ((trial = 1; trial <= TRIALS; ++trial)); do
  rank=$((trial % 4))
  rm -rf "$T/ck"
  train=("$AXRUN" --plan "$T/pipe.json" --seed 7 --steps $STEPS --log-every 1 --save "$T/ck" --save-every 2
         --measure "$T/mk.json")
  if ((trial % 2)); then
    step=$((1 + RANDOM % (STEPS - 1)))
    how="inside, at step $((step + 1))"
    rm -f "$T/stamp"
    timeout 120 "${MPIRUN[@]}" -np 4 -x AXONN_KILL_RANK=$rank -x AXONN_KILL_STEP=$step -x AXONN_KILL_STAMP="$T/stamp" \
      "${train[@]}" >"$T/killed" 2>&1
    rc=$?
    killed_at=$(cat "$T/stamp" 2>/dev/null || echo 0)  # written by the rank as it raises SIGKILL
  else
    timeout 120 "${MPIRUN[@]}" -np 4 "${train[@]}" >"$T/killed" 2>&1 &
    job=$!
    # After a random number of printed steps (0 to 6; a step takes about 50 ms, and the
    # output lags), at a random moment within the next few.
    target=$((RANDOM % (STEPS - 3)))
    while kill -0 "$job" 2>/dev/null && (($(grep -c '^step' "$T/killed") < target)); do sleep 0.02; done
    sleep "0.0$((RANDOM % 10))"
    # The ranks are mpirun's children (once all 4 are started); MPI numbers them in start
    # order (their pids ascending).
    victim=""
    while kill -0 "$job" 2>/dev/null && [ -z "$victim" ]; do
      mpirun_pid=$(pgrep -P "$job" | head -1)
      [ -n "$mpirun_pid" ] && (($(pgrep -P "$mpirun_pid" | wc -l) == 4)) &&
        victim=$(pgrep -P "$mpirun_pid" | sort -n | sed -n "$((rank + 1))p")
      [ -n "$victim" ] || sleep 0.02
    done
    how="outside, after $(grep -c '^step' "$T/killed") steps"
    killed_at=$(now_ms)
    [ -n "$victim" ] && kill -9 "$victim"
    wait "$job"
    rc=$?
  fi
  took_ms=$(($(now_ms) - killed_at))
  # Every rank has exited (none lingers after mpirun).
  left=$(pgrep -f -- "--plan $T/pipe.json" | wc -l)
  ((left == 0)) || took_ms=999999
  verdict="FAIL"
  resumed_from="none"
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "signal 9" "$T/killed" && ((took_ms <= 30000)); then
    timeout 120 "${MPIRUN[@]}" -np 4 "$AXRUN" --plan "$T/pipe.json" --seed 7 --steps $STEPS --log-every 1 \
      --resume "$T/ck" --measure "$T/mr.json" >"$T/resumed" 2>&1
    if grep -q "no complete checkpoint" "$T/resumed"; then
      resumed_from=0
      verdict="PASS"  # killed before the first save completed: starting over is all there is
    elif grep -q "is not past the checkpoint's step $STEPS" "$T/resumed"; then
      resumed_from=$STEPS
      verdict="PASS"  # killed after the last save completed: nothing is left to run
    else
      resumed_from=$(grep -oE "resumed from .*step-[0-9]+" "$T/resumed" | grep -oE "[0-9]+$" | sed 's/^0*//')
      if [ -n "$resumed_from" ] &&
        [ "$(losses "$T/resumed")" = "$(tail -n $((STEPS - resumed_from)) "$T/straight.losses")" ]; then verdict="PASS"; fi
    fi
  fi
  [ "$verdict" = PASS ] && ok=$((ok + 1))
  printf '%s trial %2d: rank %d killed from %s: rc %d, ended %d.%03d s after; resumed from step %s\n' \
    "$verdict" "$trial" "$rank" "$how" "$rc" "$((took_ms / 1000))" "$((took_ms % 1000))" "$resumed_from"
  [ "$verdict" = PASS ] || tail -5 "$T/killed" "$T/resumed" 2>/dev/null | sed 's/^/    /'
done
echo "$ok of $TRIALS trials passed"
[ "$ok" -eq "$TRIALS" ]
