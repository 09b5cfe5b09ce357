#!/usr/bin/env bash
# Soak (issue #14; not in CI: about 10 minutes on 2 cores): 1000 steps of gpt-bench on
# 4 ranks (grid 1,1,2,2,1: Z x data), then, after a 100-step warm-up, rank 0's peak, live
# and reserved device bytes, live host-tier bytes and resident set size (RSS) per step
# must each stay within 2% of their post-warm-up median (flat: nothing grows step by step).
#
#   bash tools/soak.sh [STEPS=1000] [BUILD_DIR=build]     # SOAK_JSON=FILE keeps the measurement
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-1000} BUILD=${2:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BUILD/tools/axplan" plan --model gpt-bench --topology perlmutter --gpus 4 --batch-seqs 8 --grid 1,1,2,2,1 \
  --output "$T/plan.json" >/dev/null
start=$SECONDS
mpirun --oversubscribe --allow-run-as-root -np 4 "$BUILD/tools/axrun" --plan "$T/plan.json" --steps "$STEPS" \
  --log-every 100 --measure "${SOAK_JSON:=$T/soak.json}"
echo "soak: $STEPS steps in $((SECONDS - start)) s"
python3 - "$SOAK_JSON" <<'PY'
import json, statistics, sys
steps = json.load(open(sys.argv[1]))["steps"]
warm = 100 if len(steps) > 200 else len(steps) // 4
after = steps[warm:]
ok = True
for key in ("peak_device_bytes", "live_device_bytes", "reserved_device_bytes", "live_host_bytes", "resident_bytes"):
    values = [s[key] for s in after]
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    spread = (hi - lo) / med if med else 0.0
    deviation = max(hi - med, med - lo) / med if med else 0.0  # the criterion: every step within 2% of the median
    first, last = statistics.median(values[:50]), statistics.median(values[-50:])
    drift = (last - first) / med if med else 0.0
    flat = deviation <= 0.02
    ok &= flat
    print(f"{key:18s} median {med / 2**20:8.2f} MiB  min {lo / 2**20:8.2f}  max {hi / 2**20:8.2f}  "
          f"max deviation {100 * deviation:5.2f}%  (max-min {100 * spread:5.2f}%)  "
          f"drift first->last 50 steps {100 * drift:+5.2f}%  {'flat' if flat else 'NOT FLAT'}")
print("soak: " + ("PASS" if ok else "FAIL") + f" ({len(after)} steps after a {warm}-step warm-up, within 2%)")
sys.exit(0 if ok else 1)
PY
