#!/usr/bin/env bash
# Compares the full rankings of two axplan binaries: `rank --top 0 --format json
# --show-rejected` on 9 model/cluster/size triples x 8 option sets (72 runs). Prints
# the number of runs and exits 1 if any output differs (a planner change that should
# not move a number must print "identical"). IGNORE_KEYS: JSON keys the new binary adds,
# dropped from both outputs before comparing (comma-separated; e.g. "optimizer").
#
#   tools/compare_rankings.sh /tmp/old/axplan build/tools/axplan [IGNORE_KEYS]
set -euo pipefail
old=$1 new=$2 ignore=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
runs=0 differ=0
for spec in "gpt-80b frontier 16384 8192" "gpt-80b frontier 1024 2048" "gpt-20b perlmutter 32 64" \
            "gpt-20b perlmutter 256 512" "axonn-100b summit 1536 1536" "gpt-tiny dgx-h100 8 16" \
            "gpt-bench perlmutter 64 128" "bert-large dgx-h100 16 64" "gpt-40b frontier 512 1024"; do
  read -r model cluster gpus batch <<<"$spec"
  for opt in "" "--pipeline-schedule 1f1b" "--pipeline-schedule gpipe" "--pipeline-limit 2" "--no-checkpointing" \
             "--checkpoint-interval axonn" "--cache-layers 3 --precision fp32" "--placement-agnostic"; do
    runs=$((runs + 1))
    # shellcheck disable=SC2086
    args=(rank --model "$model" --topology "$cluster" --gpus "$gpus" --batch-seqs "$batch" $opt --top 0 --format json --show-rejected)
    "$old" "${args[@]}" >"$dir/old" 2>&1 || true
    "$new" "${args[@]}" >"$dir/new" 2>&1 || true
    if [ -n "$ignore" ]; then
      for f in "$dir/old" "$dir/new"; do
        python3 - "$f" "$ignore" <<'PY'
import json, sys
path, keys = sys.argv[1], set(sys.argv[2].split(","))
def drop(v):
    if isinstance(v, dict): return {k: drop(x) for k, x in v.items() if k not in keys}
    if isinstance(v, list): return [drop(x) for x in v]
    return v
try: text = json.dumps(drop(json.load(open(path))), indent=2)
except ValueError: text = open(path).read()  # an error message, compared as it is
open(path, "w").write(text)
PY
      done
    fi
    if ! cmp -s "$dir/old" "$dir/new"; then
      differ=$((differ + 1))
      echo "differs: ${args[*]}"
    fi
  done
done
if [ "$differ" -eq 0 ]; then echo "identical: $runs runs"; else echo "$differ of $runs runs differ"; exit 1; fi
