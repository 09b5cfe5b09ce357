#!/usr/bin/env bash
# The README example's ten best grids, run end to end: `axplan rank` for GPT-20B on 32
# Perlmutter GPUs (batch 32768 tokens = 16 sequences) gives the grid shapes; each is
# planned for a small GPT of GPT-20B's shape (32 blocks; every width a power of two, so
# the same grids divide it) and trained for a few steps by `axrun` on 32 ranks (oversubscribed
# on a small machine). Every grid must print the per-step losses of the 1-rank plan with the
# same seed (to 4 printed decimals). Prints one line per grid; exits non-zero if any fails.
#   bash tools/run_readme_top10.sh [BUILD_DIR] [STEPS]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build} STEPS=${2:-2}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cat >"$T/gpt-20b-small.json" <<'JSON'
{"name": "gpt-20b-small", "description": "GPT-20B's 32 blocks at hidden 256 (16 heads), seq 16, vocab 512",
 "family": "gpt", "num_layers": 32, "hidden": 256, "heads": 16, "seq_len": 16, "vocab": 512, "ffn_multiplier": 4}
JSON
"$BUILD/tools/axplan" rank --model gpt-20b --topology perlmutter --gpus 32 --batch-tokens 32768 --top 10 \
  --format json >"$T/top10.json" || exit 1
grids=$(python3 -c "import json,sys; [print(f\"{c['gx']},{c['gy']},{c['gz']},{c['gdata']},{c['ginter']}\") for c in json.load(open(sys.argv[1]))['candidates']]" "$T/top10.json")
losses() { grep -oE 'loss [0-9.]+' "$1" | awk '{print $2}' | tr '\n' ' '; }
"$BUILD/tools/axplan" plan --model "$T/gpt-20b-small.json" --topology perlmutter --gpus 1 --batch-seqs 16 \
  --grid 1,1,1,1,1 --precision fp32 --output "$T/serial.json" >/dev/null || exit 1
"$BUILD/tools/axrun" --plan "$T/serial.json" --steps "$STEPS" --log-every 1 >"$T/serial.log" 2>&1 || exit 1
ref=$(losses "$T/serial.log")
echo "1-rank plan: losses $ref"
fails=0 n=0
for g in $grids; do
  n=$((n + 1))
  if ! "$BUILD/tools/axplan" plan --model "$T/gpt-20b-small.json" --topology perlmutter --gpus 32 --batch-seqs 16 \
       --grid "$g" --precision fp32 --output "$T/plan.json" >"$T/plan.log" 2>&1; then
    echo "FAIL #$n grid $g: $(tail -1 "$T/plan.log")"; fails=$((fails + 1)); continue
  fi
  start=$SECONDS
  sched=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1])); print(p['pipeline']['schedule'] if {'name': 'pipe', 'size': 1} not in p['mesh'] else 'none')" "$T/plan.json")
  if timeout 900 mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp -np 32 "$BUILD/tools/axrun" \
       --plan "$T/plan.json" --steps "$STEPS" --log-every 1 >"$T/run.log" 2>&1; then
    got=$(losses "$T/run.log")
    if [ "$got" = "$ref" ]; then
      echo "PASS #$n grid $g pipeline $sched ($((SECONDS - start)) s): losses $got"
    else
      echo "FAIL #$n grid $g pipeline $sched: losses $got, 1-rank plan $ref"; fails=$((fails + 1))
    fi
  else
    echo "FAIL #$n grid $g: $(tail -3 "$T/run.log" | tr '\n' ' ')"; fails=$((fails + 1))
  fi
done
echo "$((n - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
