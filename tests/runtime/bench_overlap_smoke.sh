#!/usr/bin/env bash
# bench_overlap on 2 ranks over TCP in a rate-limited network namespace: it runs, and
# prints a row per overlap level. Exit 77 (skipped) where namespaces/tc are unavailable.
set -uo pipefail
LIMITED=$1 BENCH=$2
read -r -a MPIRUN <<<"$3"  # only its first word, the launcher, is used: this test picks its own transport
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "skipped: needs root and ip netns"; exit 77
fi
out=$(timeout 240 bash "$LIMITED" 1gbit "${MPIRUN[0]}" --oversubscribe --allow-run-as-root --mca btl self,tcp --mca btl_tcp_if_include lo \
      --mca oob_tcp_if_include lo -np 2 "$BENCH" --grid 1,1,2,1 --steps 1 --warmup 0 2>&1)
rc=$?
echo "$out" | tail -8
if [ $rc -ne 0 ]; then echo "FAIL: rc $rc"; exit 1; fi
rows=$(echo "$out" | grep -cE '^ +[0-4] +[0-9.]+ +[0-9.]+')
if [ "$rows" -ne 5 ]; then echo "FAIL: expected 5 level rows, got $rows"; exit 1; fi
echo "1 passed, 0 failed"
