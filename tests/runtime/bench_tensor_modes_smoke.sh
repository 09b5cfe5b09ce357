#!/usr/bin/env bash
# bench_tensor_modes on 4 ranks, one step of each mode: it runs, and prints a row per
# tensor mode with its measured time and both ratios to 1d (1d's own both 1.000).
set -uo pipefail
BENCH=$1
read -r -a MPIRUN <<<"$2"
out=$(timeout 240 "${MPIRUN[@]}" -np 4 "$BENCH" --topology perlmutter --model gpt-tiny --seqs 8 --steps 1 --warmup 0 2>&1)
rc=$?
echo "$out" | tail -8
if [ $rc -ne 0 ]; then echo "FAIL: rc $rc"; exit 1; fi
fails=0
for mode in 1d axonn3d 2d "2d broadcast" sequence; do
  # mode, grid words, then measured (ms), its ratio, predicted (ms), its ratio
  row=$(echo "$out" | grep -E "^ *${mode} +gx=" | head -1)
  if ! echo "$row" | grep -qE ' [0-9]+\.[0-9] +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9] +[0-9]+\.[0-9]{3}$'; then
    echo "FAIL: no row for $mode with its times and ratios"; fails=$((fails + 1)); continue
  fi
  measured=$(echo "$row" | awk '{print $(NF-3)}')
  if ! awk -v m="$measured" 'BEGIN { exit !(m > 0) }'; then echo "FAIL: $mode measured $measured ms"; fails=$((fails + 1)); fi
done
if ! echo "$out" | grep -qE '^ *1d +gx=.* 1\.000 +[0-9.]+ +1\.000$'; then echo "FAIL: 1d's ratios are not 1.000"; fails=$((fails + 1)); fi
[ $fails -eq 0 ] || exit 1
echo "1 passed, 0 failed"
