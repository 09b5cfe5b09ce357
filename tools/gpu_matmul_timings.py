#!/usr/bin/env python3
"""Times the planner's local matrix products, and its element-wise operations, on one
GPU with PyTorch, for `axplan fit-matmul` (docs/validation.md, "Matrix products measured
on a GPU"). Not part of CI, which has no GPU.

    axplan matmul-shapes --runs megatron-lm-2021 --model gpt-20b --out shapes.json
    python3 tools/gpu_matmul_timings.py shapes.json timings.json      # on the GPU
    axplan fit-matmul --timings timings.json --topology dgx-h100

Each product (batch, m x k by k x n) runs as torch.matmul (batch 1) or torch.bmm in
bf16 (fp32 accumulation, cuBLAS's choice of kernel), on normal random data. Operands are
copied until one pass over the copies reads at least 256 MiB, and calls cycle through
them, so small products do not find their operands in the 50-60 MB L2 cache. After three
warm-up calls, each repeat times a loop of calls (enough for 2 ms) between two CUDA
events; the time per call is the median of the repeats, and the spread is
(max - min) / median. Calls in a loop are issued back to back, as a training step
issues them, so the time excludes the launch latency that the CPU hides.

Element-wise operations run as the planner counts them (topo::elementwise_op_names,
all but layer_norm_split, the runtime's split layer norm, which a fitted topology
charges its roofline bytes), in bf16, unfused (Megatron fuses several): the forward, then the backward as
torch.autograd.grad with the output's gradient made beforehand (the inputs' gradients
returned, not accumulated into .grad), each timed between CUDA events, median of the
repeats. Adam (fused) and the gradient accumulation (an fp32 buffer += a bf16 dW, as a
main_grad hook adds) have no backward.
"""
import argparse
import math
import statistics
import sys
import time

import tool_json

L2_FLUSH_BYTES = 256 << 20
WARMUP = 3
LOOP_SECONDS = 2e-3


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shapes", help="shapes file (axplan matmul-shapes)")
    p.add_argument("out", help="timings file to write (axplan fit-matmul reads it)")
    p.add_argument("--repeats", type=int, default=7, help="timed loops per product")
    p.add_argument("--no-elementwise", action="store_true", help="time the products only")
    return p.parse_args(argv)


def read_shapes(path):
    shapes = tool_json.read_list("gpu_matmul_timings", path, "axonn-matmul-shapes", "shapes",
                                 "a shapes file (axplan matmul-shapes)")
    for i, s in enumerate(shapes):
        for key in ("m", "k", "n", "batch"):
            v = s.get(key) if isinstance(s, dict) else None
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                tool_json.bad_input("gpu_matmul_timings", f"{path}: /shapes/{i}/{key}: expected an integer >= 1")
    return shapes


def summarize(per_call):
    med = statistics.median(per_call)
    return med, (max(per_call) - min(per_call)) / med


def time_loop(torch, fn, calls, repeats):
    """Seconds per call of fn(i), i = 0..calls-1, timed `repeats` times."""
    per_call = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls):
            fn(i)
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1e-3 / calls)
    return per_call


def time_product(torch, s, repeats):
    b, m, k, n = s["batch"], s["m"], s["k"], s["n"]
    set_bytes = 2 * b * (m * k + k * n + m * n)
    copies = max(1, math.ceil(L2_FLUSH_BYTES / set_bytes))
    dev, dt = "cuda", torch.bfloat16
    lhs = [torch.randn((b, m, k) if b > 1 else (m, k), device=dev, dtype=dt) for _ in range(copies)]
    rhs = [torch.randn((b, k, n) if b > 1 else (k, n), device=dev, dtype=dt) for _ in range(copies)]
    outs = [torch.empty((b, m, n) if b > 1 else (m, n), device=dev, dtype=dt) for _ in range(copies)]
    if b > 1:
        def call(i):
            torch.bmm(lhs[i % copies], rhs[i % copies], out=outs[i % copies])
    else:
        def call(i):
            torch.matmul(lhs[i % copies], rhs[i % copies], out=outs[i % copies])
    for i in range(WARMUP):
        call(i)
    one = statistics.median(time_loop(torch, call, 1, 3))
    calls = max(1, min(2000, math.ceil(LOOP_SECONDS / one)))
    seconds, spread = summarize(time_loop(torch, call, calls, repeats))
    del lhs, rhs, outs
    return seconds, spread, copies, calls


def elementwise_cases(torch):
    """(op, elements, make inputs, forward) for each operation at about 2^26 elements."""
    F = torch.nn.functional
    dev, dt = "cuda", torch.bfloat16

    def t(*shape):
        return torch.randn(*shape, device=dev, dtype=dt).requires_grad_()

    rows_ffn, ffn = 2730, 24576        # bias, GELU: the FFN width of a 6144-wide GPT
    rows_h, h = 10922, 6144            # layer norm, residual
    seqs, s = 16, 2048                 # softmax: 16 heads' scores of 2048 tokens
    rows_v, vocab = 1310, 51200        # cross-entropy
    params = 1 << 26                   # Adam, the gradient accumulation
    mask = torch.ones(s, s, device=dev, dtype=torch.bool).triu_(1)
    target = torch.randint(0, vocab, (rows_v,), device=dev)
    return [
        ("bias", rows_ffn * ffn, lambda: (t(rows_ffn, ffn), t(ffn)), lambda x, b: x + b),
        ("layer_norm", rows_h * h, lambda: (t(rows_h, h), t(h), t(h)), lambda x, w, b: F.layer_norm(x, (h,), w, b)),
        ("gelu", rows_ffn * ffn, lambda: (t(rows_ffn, ffn),), lambda x: F.gelu(x)),
        ("residual", rows_h * h, lambda: (t(rows_h, h), t(rows_h, h)), lambda a, b: a + b),
        ("softmax", seqs * s * s, lambda: (t(seqs, s, s),),
         lambda x: torch.softmax((x * 0.125).masked_fill(mask, float("-inf")), dim=-1)),
        ("cross_entropy", rows_v * vocab, lambda: (t(rows_v, vocab),), lambda x: F.cross_entropy(x, target)),
        ("adam", params, None, None),
        ("grad_accumulate", params, None, None),
    ]


def time_elementwise(torch, repeats):
    """Forward and backward of each operation between CUDA events. The backward is
    torch.autograd.grad with the output's gradient made beforehand: the inputs'
    gradients are returned, as to the layer before in a step, not accumulated into
    .grad (which would add a copy that a step does not make)."""
    out = []
    for op, elements, make, forward in elementwise_cases(torch):
        if op == "adam":
            p = torch.randn(elements, device="cuda", dtype=torch.float32, requires_grad=True)
            p.grad = torch.randn_like(p)
            opt = torch.optim.Adam([p], lr=1e-4, fused=True)
            for _ in range(WARMUP):
                opt.step()
            fwd, _ = summarize(time_loop(torch, lambda i: opt.step(), 1, repeats))
            out.append({"op": op, "elements": elements, "forward_s": fwd, "backward_s": 0.0})
            del opt, p
            continue
        if op == "grad_accumulate":  # a main_grad hook: the fp32 gradient += the bf16 dW
            acc = torch.zeros(elements, device="cuda", dtype=torch.float32)
            dw = torch.randn(elements, device="cuda", dtype=torch.bfloat16)
            for _ in range(WARMUP):
                acc.add_(dw)
            fwd, _ = summarize(time_loop(torch, lambda i: acc.add_(dw), 1, repeats))
            out.append({"op": op, "elements": elements, "forward_s": fwd, "backward_s": 0.0})
            del acc, dw
            continue
        inputs = make()
        grad_out = torch.ones_like(forward(*inputs))
        fwd_t, bwd_t = [], []
        for r in range(WARMUP + repeats):
            e = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            e[0].record()
            y = forward(*inputs)
            e[1].record()
            e[2].record()
            grads = torch.autograd.grad(y, inputs, grad_out)
            e[3].record()
            e[3].synchronize()
            del y, grads
            if r >= WARMUP:
                fwd_t.append(e[0].elapsed_time(e[1]) * 1e-3)
                bwd_t.append(e[2].elapsed_time(e[3]) * 1e-3)
        out.append({"op": op, "elements": elements, "forward_s": statistics.median(fwd_t),
                    "backward_s": statistics.median(bwd_t)})
        del inputs, grad_out
        torch.cuda.empty_cache()
    return out


def main(argv):
    a = parse_args(argv)
    shapes = read_shapes(a.shapes)
    import torch  # after the arguments: --help works without a GPU
    if not torch.cuda.is_available():
        sys.exit("gpu_matmul_timings: no CUDA device (torch.cuda.is_available() is False)")
    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}, CUDA {torch.version.cuda}, {len(shapes)} products", flush=True)
    started = time.time()
    timings = []
    for i, s in enumerate(shapes):
        seconds, spread, copies, calls = time_product(torch, s, a.repeats)
        flops = 2.0 * s["batch"] * s["m"] * s["k"] * s["n"]
        timings.append({"m": s["m"], "k": s["k"], "n": s["n"], "batch": s["batch"], "group": s.get("group", ""),
                        "seconds": seconds, "spread": spread})
        print(f"{i + 1}/{len(shapes)} {s['batch']}x{s['m']}x{s['k']}x{s['n']}: {seconds * 1e6:.2f} us, "
              f"{flops / seconds / 1e12:.1f} TFLOP/s, spread {100 * spread:.1f}%, {copies} copies, {calls} calls",
              flush=True)
        torch.cuda.empty_cache()
    doc = {
        "format": "axonn-matmul-timings",
        "version": 1,
        "device": device,
        "software": f"torch {torch.__version__}, CUDA {torch.version.cuda}",
        "dtype": "bf16",
        "method": (f"torch.matmul/bmm, normal random operands cycled over >= {L2_FLUSH_BYTES >> 20} MiB, "
                   f"{WARMUP} warm-up calls, median of {a.repeats} loops of back-to-back calls (>= 2 ms) "
                   f"timed by CUDA events; {time.time() - started:.0f} s for the products"),
        "timings": timings,
    }
    if not a.no_elementwise:
        doc["elementwise"] = time_elementwise(torch, a.repeats)
        for e in doc["elementwise"]:
            print(f"{e['op']}: {e['elements']} elements, forward {e['forward_s'] * 1e6:.1f} us, "
                  f"backward {e['backward_s'] * 1e6:.1f} us", flush=True)
    tool_json.write(a.out, doc)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
