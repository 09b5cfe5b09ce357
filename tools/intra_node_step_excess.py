#!/usr/bin/env python3
"""What each ring step of a tensor collective inside a node cost beyond the model, by
pipeline depth, from a validate report (axplan validate's report.json); the table of
docs/validation.md, "Latency by placement".

Usage: intra_node_step_excess.py REPORT.json GPUS_PER_NODE

For every measured configuration and each of its Z all-gathers and reduce-scatters and
X and Y all-reduces (the report's error_parts ag_z, rs_z, ar_x, ar_y, with at least 5
calls per step) whose group stays inside a node (eq. 10: the group's size times the
sizes of the mesh axes placed inside it, the mesh listed innermost first, at most
GPUS_PER_NODE), the excess per ring step is (measured_s - predicted_s) / calls / steps,
steps = p - 1 for an all-gather or reduce-scatter and 2 (p - 1) for an all-reduce.
Prints the median over the configurations, in ms, for each pipeline depth (ginter)."""
import statistics
import sys

import tool_json

PARTS = {"ag_z": ("z", 1), "rs_z": ("z", 1), "ar_x": ("x", 2), "ar_y": ("y", 2)}  # part: (axis, steps per p - 1)


def main(argv):
    if len(argv) != 3:
        tool_json.bad_input("intra_node_step_excess", "usage: intra_node_step_excess.py REPORT.json GPUS_PER_NODE")
    path = argv[1]
    try:
        gpn = int(argv[2])
    except ValueError as e:
        tool_json.bad_input("intra_node_step_excess", f"GPUS_PER_NODE {argv[2]}: {e}; expected a positive number")
    configs = tool_json.read_report("intra_node_step_excess", path)
    if gpn < 1:
        tool_json.bad_input("intra_node_step_excess", f"GPUS_PER_NODE {gpn}: expected a positive number")
    by_depth = {}
    for c in configs:
        parts, mesh = c.get("error_parts") or {}, c.get("mesh") or []
        inner = {}  # axis -> (ranks inside it, its size)
        ip = 1
        for axis in mesh:
            inner[axis["name"]] = (ip, axis["size"])
            ip *= axis["size"]
        for part, (axis, per_step) in PARTS.items():
            v = parts.get(part)
            if not v or v["calls"] < 5 or axis not in inner:
                continue
            ranks_inside, p = inner[axis]
            if p < 2 or ranks_inside * p > gpn:
                continue
            steps = per_step * (p - 1)
            depth = c["grid"]["ginter"]
            by_depth.setdefault(depth, []).append((v["measured_s"] - v["predicted_s"]) / v["calls"] / steps)
    if not by_depth:
        tool_json.bad_input("intra_node_step_excess", f"{path}: no tensor collective inside a node of {gpn} GPUs")
    for depth, excess in sorted(by_depth.items()):
        print(f"{depth} stage(s): {1e3 * statistics.median(excess):+.2f} ms per ring step "
              f"(median of {len(excess)} collectives)")


if __name__ == "__main__":
    main(sys.argv)
