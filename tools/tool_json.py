"""JSON in and out for the scripts in tools/ (gpu_matmul_timings.py, gpu_step_check.py,
gpu_step_compare.py, data_wait.py, intra_node_step_excess.py, exact_part_mape.py): bad input ends the program with its message and exit code 2, as
axplan does; a document is written atomically (a temporary file renamed over the
target), so a run cut short leaves the old file or none, never half of one.

    import tool_json
    shapes = tool_json.read_list("gpu_matmul_timings", path, "axonn-matmul-shapes", "shapes",
                                 "a shapes file (axplan matmul-shapes)")
    tool_json.write("timings.json", {"format": ...})
"""
import json
import os
import sys


def bad_input(program, message):
    """The message on standard error, then exit code 2."""
    print(f"{program}: {message}", file=sys.stderr)
    sys.exit(2)


def read_list(program, path, fmt, key, what):
    """The non-empty array `key` of the version-1 document `fmt` in `path`."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        bad_input(program, f"{path}: {e}; expected {what}")
    if not isinstance(doc, dict) or doc.get("format") != fmt or doc.get("version") != 1:
        bad_input(program, f"{path}: /format, /version: expected {fmt}, version 1, in {what}")
    items = doc.get(key)
    if not isinstance(items, list) or not items:
        bad_input(program, f"{path}: /{key}: expected a non-empty array")
    return items


def read_report(program, path):
    """The configurations (a list) of axplan validate's report.json in `path`."""
    try:
        with open(path) as f:
            configs = json.load(f)["configs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        bad_input(program, f"{path}: {e}; expected a validate report.json")
    if not isinstance(configs, list):
        bad_input(program, f"{path}: /configs: expected an array, in a validate report.json")
    return configs


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
