#!/usr/bin/env bash
# A launcher for the axplan validate test: runs `mpirun -np 2 COMMAND...`, except that
# a plan whose mesh has z = 2 fails at once (a configuration that cannot run), so the
# test can check that the sweep records it and goes on.
#   failing_launcher.sh MPIRUN -- AXRUN --plan PLAN ...
set -euo pipefail
mpirun_bin=$1; shift; [ "$1" = "--" ] && shift
plan=""
for ((i = 1; i <= $#; i++)); do [ "${!i}" = "--plan" ] && { j=$((i + 1)); plan=${!j}; }; done
if python3 -c 'import json,sys; sys.exit(0 if {"name": "z", "size": 2} in json.load(open(sys.argv[1]))["mesh"] else 1)' "$plan"; then
  echo "failing_launcher: injected failure for $plan" >&2
  exit 3
fi
exec "$mpirun_bin" --oversubscribe --allow-run-as-root -np 2 "$@"
