#!/usr/bin/env python3
"""One run's steps split from rank 0's Chrome trace (axrun --trace), added to a JSON
file of runs; used by tools/dedicated_cores_sweep.sh (PLANS=...) and checked by
tests/runtime/axrun_cli_test.sh.

Usage: trace_summary.py OUT.json NAME MEASURE.json RANK0_TRACE.json

The trace marks each step (category "step", from the runtime's begin_step to its
end_step); a span belongs to the step it starts in. The first step is left out, as
validate leaves it out; a run of one step keeps it. Per run: batch_s (the steps'
median, from MEASURE.json), comm_busy_s (the collectives' spans, category "comm", summed
per step: spans that overlap each other or compute count in full), matmul_s (the traced
products, category "compute", per step: the runtime times each layer's products, the
embedding's lookup as "Forward 0"), matmul_ms_by_op {"Forward 3": ms, ...}; the parts
are means over the steps kept. Prints one line."""
import collections
import json
import os
import statistics
import sys

import trace_steps


def main(out_path, name, measure_path, trace_path):
    steps = json.load(open(measure_path))["steps"]
    try:
        events, kept, left_out = trace_steps.read(trace_path)
    except ValueError as e:
        sys.exit(f"trace_summary: {e}")
    by_op, comm_us = collections.defaultdict(float), 0.0
    for e in events:
        if e.get("cat") not in ("compute", "comm"):
            continue
        if not any(trace_steps.within(e, m) for m in kept):
            continue
        if e["cat"] == "compute":
            by_op[e["name"]] += e["dur"]
        else:
            comm_us += e["dur"]
    n = len(kept)
    batch = [s["batch_s"] for s in steps[left_out:]]
    run = {
        "steps": n,
        "batch_s": statistics.median(batch),
        "comm_busy_s": comm_us / n / 1e6,
        "matmul_s": sum(by_op.values()) / n / 1e6,
        "matmul_ms_by_op": {k: v / n / 1e3 for k, v in sorted(by_op.items())},
    }
    runs = json.load(open(out_path)) if os.path.exists(out_path) else {}
    runs[name] = run
    with open(out_path + ".tmp", "w") as f:
        json.dump(runs, f, indent=1)
    os.replace(out_path + ".tmp", out_path)
    rest = run["batch_s"] - run["comm_busy_s"] - run["matmul_s"]
    print(f"{name}: step {run['batch_s']:.3f} s = collectives {run['comm_busy_s']:.3f} + products "
          f"{run['matmul_s']:.3f} + the rest {rest:.3f} (mean of {n} step(s))")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
