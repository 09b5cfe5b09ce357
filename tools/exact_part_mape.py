#!/usr/bin/env python3
"""Which part of the model holds a sweep's error: the placement-aware MAPE of a validate
report (axplan validate's report.json) with each part of the batch time predicted
exactly, one part at a time (the configuration's prediction plus that part's measured
minus predicted seconds; the parts are the report's error_parts, which add up to the
batch time), then with the tensor group's parts and the sync wait exact together. Then
the compute's rate against every rank computing at once (calibrate's kernels), by
pipeline depth: the model's (the lent-core speedup, docs/model.md section 10; 1 where
the report has none) and the measured (the model's times the predicted compute over
the measured), medians over the configurations. The tables of docs/validation.md,
"What the wait inside a node is not".

Usage: exact_part_mape.py REPORT.json"""
import statistics
import sys

import tool_json

# The tensor group's collectives and the sync wait charged before them.
TENSOR = ("ag_z", "rs_z", "ar_x", "ar_y", "act_x", "act_y", "small", "summa", "sync_wait")


def main(argv):
    if len(argv) != 2:
        tool_json.bad_input("exact_part_mape", "usage: exact_part_mape.py REPORT.json")
    path = argv[1]
    try:
        configs = [c for c in tool_json.read_report("exact_part_mape", path)
                   if c.get("error_parts") and c.get("measured_batch_s")]
        predicted = [c["predicted"]["placement_aware"]["batch_s"] for c in configs]
    except (KeyError, TypeError, AttributeError) as e:
        tool_json.bad_input("exact_part_mape", f"{path}: {e}; expected a validate report.json")
    if not configs:
        tool_json.bad_input("exact_part_mape", f"{path}: no measured configuration with error_parts")

    def excess(c, parts):
        return sum(c["error_parts"][k]["measured_s"] - c["error_parts"][k]["predicted_s"]
                   for k in parts if k in c["error_parts"])

    def mape(parts):
        return 100 * statistics.mean(abs(p + excess(c, parts) - c["measured_batch_s"]) / c["measured_batch_s"]
                                     for c, p in zip(configs, predicted))

    rows = [(mape((k,)), k) for k in sorted({k for c in configs for k in c["error_parts"]})]
    rows.append((mape(TENSOR), "the tensor group's parts and the sync wait"))
    print(f"MAPE as predicted: {mape(()):.1f}% ({len(configs)} configurations)")
    for value, part in sorted(rows):
        print(f"  {part} exact: {value:.1f}%")
    by_depth = {}  # pipeline stages -> [(model's speedup, measured speedup)]
    for c in configs:
        compute = c["error_parts"].get("compute")
        if not compute or compute["measured_s"] <= 0 or compute["predicted_s"] <= 0:
            continue
        model = c["predicted"]["placement_aware"].get("lent_core_speedup", 1.0)
        by_depth.setdefault(c["grid"]["ginter"], []).append(
            (model, model * compute["predicted_s"] / compute["measured_s"]))
    if by_depth:
        print("compute rate against every rank computing, by pipeline depth (medians):")
    for depth, v in sorted(by_depth.items()):
        print(f"  {depth} stage(s): the model's {statistics.median(m for m, _ in v):.2f}, measured "
              f"{statistics.median(x for _, x in v):.2f} ({min(x for _, x in v):.2f}-{max(x for _, x in v):.2f}, "
              f"{len(v)} configurations)")

if __name__ == "__main__":
    main(sys.argv)
