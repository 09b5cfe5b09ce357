#!/usr/bin/env python3
"""One run's step time split from rank 0's Chrome trace (axrun --trace) and its
measurement JSON (axrun --measure), added to a JSON file of runs; used by
tools/dedicated_cores_sweep.sh (PLANS=...). Steps after the first, as validate measures.

Usage: trace_summary.py OUT.json NAME MEASURE.json RANK0_TRACE.json
Per run: batch_s (median step), comm_busy_s (the collectives' spans per step, mean),
matmul_s (the traced products per step, mean), and matmul_ms_by_op {"Forward 3": ms, ...}
(each layer's product per step, mean). Prints one line."""
import collections
import json
import os
import statistics
import sys


def main(out_path, name, measure_path, trace_path):
    steps = json.load(open(measure_path))["steps"]
    events = json.load(open(trace_path))["traceEvents"]
    first_end_us = steps[0]["batch_s"] * 1e6  # the trace's clock starts with the first step
    later = len(steps) - 1
    by_op, comm_us = collections.defaultdict(float), 0.0
    for e in events:
        if e.get("ph") != "X" or e["ts"] < first_end_us:
            continue
        if e["cat"] == "compute":
            by_op[e["name"]] += e["dur"]
        else:
            comm_us += e["dur"]
    run = {
        "batch_s": statistics.median(s["batch_s"] for s in steps[1:]),
        "comm_busy_s": comm_us / later / 1e6,
        "matmul_s": sum(by_op.values()) / later / 1e6,
        "matmul_ms_by_op": {k: v / later / 1e3 for k, v in sorted(by_op.items())},
    }
    runs = json.load(open(out_path)) if os.path.exists(out_path) else {}
    runs[name] = run
    with open(out_path + ".tmp", "w") as f:
        json.dump(runs, f, indent=1)
    os.replace(out_path + ".tmp", out_path)
    rest = run["batch_s"] - run["comm_busy_s"] - run["matmul_s"]
    print(f"{name}: step {run['batch_s']:.3f} s = collectives {run['comm_busy_s']:.3f} + products "
          f"{run['matmul_s']:.3f} + the rest {rest:.3f}")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
