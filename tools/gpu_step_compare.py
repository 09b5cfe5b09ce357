#!/usr/bin/env python3
"""Sets the one-GPU steps that tools/gpu_step_check.py timed beside the planner's
prediction of the same steps (`axplan explain --gpus 1 --grid 1,1,1,1,1`), for one or
more topologies, and prints the relative errors and their mean (docs/validation.md,
"Matrix products measured on a GPU").

    python3 tools/gpu_step_compare.py --axplan build/tools/axplan --topology dgx-h100 \\
        docs/validation/h100-steps-2026-11-27-*.json
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import tool_json

SEQ, VOCAB = 2048, 51200  # as gpu_step_check.py


def predict(axplan, topology, step, workdir):
    model = {"name": f"step-{step['hidden']}x{step['layers']}", "family": "gpt", "num_layers": step["layers"],
             "hidden": step["hidden"], "heads": step["heads"], "seq_len": SEQ, "vocab": VOCAB, "ffn_multiplier": 4}
    path = os.path.join(workdir, "model.json")
    with open(path, "w") as f:
        json.dump(model, f)
    cmd = [axplan, "explain", "--model", path, "--topology", topology, "--gpus", "1", "--grid", "1,1,1,1,1",
           "--batch-seqs", str(step["batch_seqs"]), "--microbatch-seqs", str(step["microbatch_seqs"])]
    if not step.get("checkpoint", False):
        cmd.append("--no-checkpointing")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    time = re.search(r"batch time ([0-9.]+) s", out.stdout)
    memory = re.search(r"memory per GPU ([0-9.]+) GiB", out.stdout)
    ms = r"([0-9.]+) \([0-9.]+\)"  # busy (compute)
    passes = re.search(rf"^0\s+{ms}\s+{ms}\s+{ms}\s+[0-9.]+$", out.stdout, re.MULTILINE)
    if not time or not memory or not passes:
        sys.exit(f"{' '.join(cmd)}: no batch time, memory or passes of stage 0 in its output")
    # A step's forward passes and backward passes: M micro-batches, the last backward apart.
    m = step["batch_seqs"] // step["microbatch_seqs"]
    forward, backward, last = (float(passes.group(i)) * 1e-3 for i in (1, 2, 3))
    return float(time.group(1)), float(memory.group(1)), m * forward, (m - 1) * backward + last


def ckpt_label(step):
    """no; yes (the block's whole forward recomputed, as the planner charges); yes* (PyTorch's
    early stop on: the recompute skipped each block's last product, bias and residual add)."""
    if not step.get("checkpoint", False):
        return "no"
    return "yes" if step.get("checkpoint_early_stop", True) is False else "yes*"


def read_steps(path):
    steps = tool_json.read_list("gpu_step_compare", path, "axonn-gpu-steps", "steps",
                                "a steps file (tools/gpu_step_check.py)")
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            tool_json.bad_input("gpu_step_compare", f"{path}: /steps/{i}: expected an object")
        for key in ("hidden", "heads", "layers", "batch_seqs", "microbatch_seqs"):
            v = s.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                tool_json.bad_input("gpu_step_compare", f"{path}: /steps/{i}/{key}: expected an integer >= 1")
        if not isinstance(s.get("checkpoint", False), bool):
            tool_json.bad_input("gpu_step_compare", f"{path}: /steps/{i}/checkpoint: expected true or false")
        if not isinstance(s.get("checkpoint_early_stop", True), bool):
            tool_json.bad_input("gpu_step_compare", f"{path}: /steps/{i}/checkpoint_early_stop: expected true or false")
        for key in ("step_s", "peak_bytes", "forward_s", "backward_s"):
            if key not in s and key in ("forward_s", "backward_s"):
                continue  # steps files written before the passes were timed apart
            v = s.get(key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
                tool_json.bad_input("gpu_step_compare", f"{path}: /steps/{i}/{key}: expected a number > 0")
    return steps


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("steps", nargs="+", help="files gpu_step_check.py wrote")
    p.add_argument("--axplan", default="build/tools/axplan")
    p.add_argument("--topology", action="append", required=True, help="a shipped name or a path (repeatable)")
    a = p.parse_args(argv)
    rows = []
    for path in a.steps:
        rows += [(os.path.basename(path), s) for s in read_steps(path)]
    errors = {t: [] for t in a.topology}
    phases = []  # (name, step, topology, predicted forward, predicted backward) where the step timed them
    header = f"{'file':<34} {'h':>5} {'L':>2} {'B':>3} {'mb':>3} {'ckpt':>4} {'meas ms':>8} {'GiB':>5}"
    for t in a.topology:
        header += f" | {os.path.basename(t)[:16]:>16} {'err':>7} {'GiB':>6}"
    print(header)
    with tempfile.TemporaryDirectory() as work:
        for name, s in rows:
            line = (f"{name:<34} {s['hidden']:>5} {s['layers']:>2} {s['batch_seqs']:>3} {s['microbatch_seqs']:>3} "
                    f"{ckpt_label(s):>4} {s['step_s'] * 1e3:>8.1f} {s['peak_bytes'] / 2**30:>5.1f}")
            for t in a.topology:
                predicted, gib, forward, backward = predict(a.axplan, t, s, work)
                if "forward_s" in s and "backward_s" in s:
                    phases.append((name, s, t, forward, backward))
                e = predicted / s["step_s"] - 1
                errors[t].append(abs(e))
                line += f" | {predicted * 1e3:>16.1f} {100 * e:>+6.1f}% {gib:>6.1f}"
            print(line)
    for t in a.topology:
        print(f"{t}: mean |error| {100 * sum(errors[t]) / len(errors[t]):.1f}% over {len(errors[t])} steps, "
              f"worst {100 * max(errors[t]):.1f}%")
    if any(ckpt_label(s) == "yes*" for _, s in rows):
        print("yes*: recomputed with PyTorch's early stop (files from before gpu_step_check.py turned it off): each "
              "block's fc2 product, bias and residual add were not recomputed, which the planner charges")
    if phases:
        print("\nforward and backward passes of a step (ms; the backward with the recompute and the accumulation):")
        print(f"{'file':<34} {'h':>5} {'ckpt':>4} {'topology':>16} {'fwd meas':>9} {'pred':>8} {'err':>7} "
              f"{'bwd meas':>9} {'pred':>8} {'err':>7}")
        for name, s, t, forward, backward in phases:
            ef, eb = forward / s["forward_s"] - 1, backward / s["backward_s"] - 1
            print(f"{name:<34} {s['hidden']:>5} {ckpt_label(s):>4} "
                  f"{os.path.basename(t)[:16]:>16} {s['forward_s'] * 1e3:>9.1f} {forward * 1e3:>8.1f} {100 * ef:>+6.1f}% "
                  f"{s['backward_s'] * 1e3:>9.1f} {backward * 1e3:>8.1f} {100 * eb:>+6.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
