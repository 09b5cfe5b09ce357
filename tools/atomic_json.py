"""Writes a JSON document atomically (a temporary file renamed over the target), for the
GPU scripts in tools/ (gpu_matmul_timings.py, gpu_step_check.py): a run cut short leaves
the old file or none, never half of one.

    import atomic_json
    atomic_json.write("timings.json", {"format": ...})
"""
import json
import os


def write(path, doc):
    """NaN and infinities are refused (they are not JSON, and axplan's reader rejects them)."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, allow_nan=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
