"""Writes a JSON document atomically (a temporary file renamed over the target), for the
GPU scripts in tools/ (gpu_matmul_timings.py, gpu_step_check.py): a run cut short leaves
the old file or none, never half of one.

    import atomic_json
    atomic_json.write("timings.json", {"format": ...})
"""
import json
import os


def write(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
