"""A Chrome trace of this runtime (axrun --trace) split by its steps, for the scripts in
tools/ that read traces (trace_summary.py, data_wait.py).

    import trace_steps
    events, kept, left_out = trace_steps.read(path)   # its complete ("X") spans, the step
                                                      # spans kept, how many left out (0 or 1)

The runtime marks each step with a span of category "step" (from its begin_step to its
end_step); a span belongs to the step it starts in (`within`). The first step is left
out, as validate leaves it out; a trace of one step keeps it. A trace without step spans
raises ValueError with a message naming the file.
"""
import json


def read(path):
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    marks = sorted((e for e in events if e.get("cat") == "step"), key=lambda e: e["ts"])
    if not marks:
        raise ValueError(f"{path}: no step spans (category 'step'); expected a trace of this runtime")
    kept = marks[1:] or marks
    return events, kept, len(marks) - len(kept)


def within(event, step):
    """Whether `event` starts inside the step span `step`."""
    return step["ts"] <= event["ts"] < step["ts"] + step["dur"]
