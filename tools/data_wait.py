#!/usr/bin/env python3
"""How long each data-parallel group's first collective of a step waits for its last
member, from every rank's Chrome trace (axrun --trace DIR); the measurement of
docs/model.md section 8, "The data group's wait".

Usage: data_wait.py PLAN.json TRACE_DIR [--json OUT.json]

A data group is the ranks that differ only on the plan's "data" and "sequence" mesh axes
(the mesh is listed innermost first; rank = mixed-radix coordinates, innermost fastest).
Per rank and step (the trace's "step" spans; a span belongs to the step it starts in),
its arrival is the start of its first data-group collective (ar_data, rs_data or
ag_data). A member's wait is the group's last arrival less its own (the traces share one
clock: the runtime starts them together). The first step is left out, as validate leaves
it out; a run of one step keeps it. Prints the mean wait per member and step, its median
over the group-steps, and rank 0's own mean (validate's traces are rank 0's alone).
--json writes {"group_steps": [{"group": [ranks], "step": k, "waits_s": [...]}, ...],
"mean_wait_s", "median_group_step_wait_s", "rank0_mean_wait_s"}."""
import json
import os
import statistics
import sys

import tool_json
import trace_steps

DATA_KINDS = ("ar_data", "rs_data", "ag_data")


def fail(msg):
    tool_json.bad_input("data_wait", msg)


def data_groups(plan, path):
    mesh = plan.get("mesh")
    if not isinstance(mesh, list) or not mesh:
        fail(f"{path}: field 'mesh': expected the plan's list of axes")
    sizes = [(a["name"], int(a["size"])) for a in mesh]
    world = 1
    for _, s in sizes:
        world *= s
    groups = {}
    for rank in range(world):
        rest, key = rank, []
        for name, s in sizes:
            coord, rest = rest % s, rest // s
            if name not in ("data", "sequence"):
                key.append(coord)
        groups.setdefault(tuple(key), []).append(rank)
    return world, [g for g in groups.values() if len(g) > 1]


def arrivals(trace_path):
    """Per step kept: the start (us) of the rank's first data-group collective, or None."""
    if not os.path.exists(trace_path):
        fail(f"{trace_path}: no such trace; expected one per rank (axrun --trace)")
    try:
        events, kept, _ = trace_steps.read(trace_path)
    except ValueError as e:
        fail(str(e))
    data = [e for e in events if e.get("cat") == "comm" and e.get("name") in DATA_KINDS]
    return [min((e["ts"] for e in data if trace_steps.within(e, m)), default=None) for m in kept]


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--json"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    plan_path, trace_dir = argv[0], argv[1]
    world, groups = data_groups(json.load(open(plan_path)), plan_path)
    if not groups:
        fail(f"{plan_path}: no data group of two or more ranks; nothing waits")
    arrive = {r: arrivals(os.path.join(trace_dir, f"rank{r}.json")) for r in range(world)}
    group_steps, rank0 = [], []
    for g in groups:
        steps = min(len(arrive[r]) for r in g)
        for k in range(steps):
            a = [arrive[r][k] for r in g]
            if any(x is None for x in a):
                continue  # a step without a data collective (none issued): nothing to wait for
            last = max(a)
            waits = [(last - x) / 1e6 for x in a]
            group_steps.append({"group": g, "step": k + 1, "waits_s": waits})
            if 0 in g:
                rank0.append(waits[g.index(0)])
    if not group_steps:
        fail(f"{trace_dir}: no step with a data-group collective ({', '.join(DATA_KINDS)}) on every member")
    per = [statistics.mean(s["waits_s"]) for s in group_steps]
    result = {"group_steps": group_steps, "mean_wait_s": statistics.mean(per),
              "median_group_step_wait_s": statistics.median(per),
              "rank0_mean_wait_s": statistics.mean(rank0) if rank0 else None}
    if len(argv) == 4:
        tool_json.write(argv[3], result)
    r0 = "" if not rank0 else f"; rank 0 waits {result['rank0_mean_wait_s']:.3f} s on average"
    print(f"data_wait: {len(groups)} data group(s) of {len(groups[0])}, {len(group_steps)} group-step(s): "
          f"mean wait {result['mean_wait_s']:.3f} s per member and step (median over group-steps "
          f"{result['median_group_step_wait_s']:.3f} s){r0}")


if __name__ == "__main__":
    main(sys.argv[1:])
