#!/usr/bin/env python3
"""Times whole training steps of the planner's GPT on one GPU with PyTorch, to set beside
`axplan explain --gpus 1 --grid 1,1,1,1,1` on that GPU's topology (with
--no-checkpointing unless --checkpoint; tools/gpu_step_compare.py does both;
docs/validation.md, "Matrix products measured on a GPU"). Not part of CI.

    python3 tools/gpu_step_check.py --config 4096,32,4,8,2 --out steps.json   # on the GPU

Each --config is hidden,heads,layers,batch_seqs,microbatch_seqs (seq 2048, vocab 51200,
FFN 4 x hidden). The model is the planner's GPT layer for layer (model_zoo family gpt):
token embedding; per block a layer norm, qkv with bias, attention (Q K^T, scale, causal
mask, softmax, P V as batched products), attn_out with bias and a residual add, a layer
norm, fc1 with bias and GELU, fc2 with bias and a residual add; a final layer norm, the
head without bias and cross-entropy. bf16 weights and activations, no dropout, no
recomputation unless --checkpoint (then each block's whole forward runs again in the
backward, as the planner's checkpoint interval 1: PyTorch's early stop, which skips the
block's last product, is turned off, and each checkpointed step says so with
"checkpoint_early_stop": false; files written before this change, the 2026-11-27 ones
included, had it on), no fused kernels. Each bf16 gradient is added
into an fp32 gradient as soon as autograd produces it and then freed (Megatron-LM's
main_grad), so the state is the planner's 18 bytes per parameter: bf16 weights, fp32
gradients, fp32 master weights and Adam's two moments. Adam (fused) updates the master
weights, which are copied back to bf16. Each step is timed between CUDA events: median
of the timed steps after the warm-up ones, with forward+backward and the optimizer
apart, and within it the micro-batches' forward passes and backward passes summed
(events between them: the backward includes the recompute and the fp32 accumulation,
as the planner's backward pass does); the peak is PyTorch's largest allocation over the
config's steps.
"""
import argparse
import gc
import math
import statistics
import sys

import tool_json

SEQ, VOCAB = 2048, 51200


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", action="append", required=True,
                   help="hidden,heads,layers,batch_seqs,microbatch_seqs (repeatable)")
    p.add_argument("--steps", type=int, default=8, help="timed steps per config")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--checkpoint", action="store_true",
                   help="recompute each block's forward in the backward (torch.utils.checkpoint)")
    p.add_argument("--out", required=True, help="JSON file to write")
    a = p.parse_args(argv)
    configs = []
    for c in a.config:
        parts = c.split(",")
        if len(parts) != 5 or not all(x.isdigit() and int(x) > 0 for x in parts):
            p.error(f"--config {c}: expected five positive integers hidden,heads,layers,batch_seqs,microbatch_seqs")
        h, heads, layers, batch, mb = map(int, parts)
        if h % heads or batch % mb:
            p.error(f"--config {c}: expected heads dividing hidden and microbatch_seqs dividing batch_seqs")
        configs.append((h, heads, layers, batch, mb))
    return a, configs


class Gpt:
    def __init__(self, torch, h, heads, layers, checkpoint):
        self.torch, self.h, self.heads, self.checkpoint = torch, h, heads, checkpoint
        f = 4 * h

        def w(*shape):
            return (torch.randn(*shape, device="cuda") * 0.02).to(torch.bfloat16).requires_grad_()

        def ones(n):
            return torch.ones(n, device="cuda", dtype=torch.bfloat16).requires_grad_()

        def zeros(n):
            return torch.zeros(n, device="cuda", dtype=torch.bfloat16).requires_grad_()

        self.emb = w(VOCAB, h)
        self.blocks = [dict(ln1=(ones(h), zeros(h)), qkv=(w(h, 3 * h), zeros(3 * h)), out=(w(h, h), zeros(h)),
                            ln2=(ones(h), zeros(h)), fc1=(w(h, f), zeros(f)), fc2=(w(f, h), zeros(h)))
                       for _ in range(layers)]
        self.ln_f = (ones(h), zeros(h))
        self.head = w(h, VOCAB)
        self.mask = torch.ones(SEQ, SEQ, device="cuda", dtype=torch.bool).triu_(1)

    def params(self):
        ps = [self.emb, self.head, *self.ln_f]
        for b in self.blocks:
            for pair in b.values():
                ps.extend(pair)
        return ps

    def loss(self, tokens, targets):
        torch, F, h = self.torch, self.torch.nn.functional, self.h
        x = F.embedding(tokens, self.emb)                                    # (mb, s, h)
        for b in self.blocks:
            if self.checkpoint:  # the block's whole forward runs again in the backward
                # Without early stop: PyTorch's default ends the recompute once the backward's
                # saved tensors exist, before fc2's product, bias and residual; axonn's runtime
                # (and the planner, and Megatron-LM's full recompute) run the whole block.
                with torch.utils.checkpoint.set_checkpoint_early_stop(False):
                    x = torch.utils.checkpoint.checkpoint(self.block, x, b, use_reentrant=False)
            else:
                x = self.block(x, b)
        y = F.layer_norm(x, (h,), *self.ln_f)
        logits = torch.matmul(y, self.head)
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    def block(self, x, b):
        torch, F, h, heads = self.torch, self.torch.nn.functional, self.h, self.heads
        mb, d = x.shape[0], h // heads
        y = F.layer_norm(x, (h,), *b["ln1"])
        qkv = torch.matmul(y, b["qkv"][0]) + b["qkv"][1]                  # (mb, s, 3h)
        q, k, v = (t.reshape(mb, SEQ, heads, d).transpose(1, 2).reshape(mb * heads, SEQ, d)
                   for t in qkv.split(h, dim=-1))
        scores = torch.bmm(q, k.transpose(1, 2)).view(mb * heads, SEQ, SEQ)
        p = torch.softmax((scores * (1.0 / math.sqrt(d))).masked_fill(self.mask, float("-inf")), dim=-1)
        c = torch.bmm(p, v).reshape(mb, heads, SEQ, d).transpose(1, 2).reshape(mb, SEQ, h)
        x = x + (torch.matmul(c, b["out"][0]) + b["out"][1])
        y = F.layer_norm(x, (h,), *b["ln2"])
        u = F.gelu(torch.matmul(y, b["fc1"][0]) + b["fc1"][1])
        x = x + (torch.matmul(u, b["fc2"][0]) + b["fc2"][1])
        return x


def time_config(torch, cfg, steps, warmup, checkpoint):
    h, heads, layers, batch, mb = cfg
    model = Gpt(torch, h, heads, layers, checkpoint)
    params = model.params()
    masters = [p.detach().float() for p in params]
    for m in masters:
        m.grad = torch.zeros_like(m)

    def accumulate(p, m):  # into the fp32 gradient, freeing the bf16 one at once
        def hook(_):
            m.grad.add_(p.grad)
            p.grad = None
        return hook

    hooks = [p.register_post_accumulate_grad_hook(accumulate(p, m)) for p, m in zip(params, masters)]
    opt = torch.optim.Adam(masters, lr=1e-5, fused=True)
    tokens = torch.randint(0, VOCAB, (batch, SEQ), device="cuda")
    targets = torch.randint(0, VOCAB, (batch, SEQ), device="cuda")
    step_t, fb_t, opt_t, fwd_t, bwd_t, losses = [], [], [], [], [], []
    for i in range(warmup + steps):
        e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        passes = []  # per micro-batch: events before the forward, between, after the backward
        e[0].record()
        for m in masters:
            m.grad.zero_()
        total = 0.0
        for j in range(0, batch, mb):
            p = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            p[0].record()
            loss = model.loss(tokens[j:j + mb], targets[j:j + mb]) * (mb / batch)
            p[1].record()
            loss.backward()  # with the recompute under --checkpoint, and the fp32 accumulation hooks
            p[2].record()
            passes.append(p)
            total = total + loss.detach()
        e[1].record()
        opt.step()
        with torch.no_grad():
            for p, m in zip(params, masters):
                p.copy_(m)
        e[2].record()
        e[2].synchronize()
        if i >= warmup:
            fb_t.append(e[0].elapsed_time(e[1]) * 1e-3)
            opt_t.append(e[1].elapsed_time(e[2]) * 1e-3)
            step_t.append(e[0].elapsed_time(e[2]) * 1e-3)
            fwd_t.append(sum(p[0].elapsed_time(p[1]) for p in passes) * 1e-3)
            bwd_t.append(sum(p[1].elapsed_time(p[2]) for p in passes) * 1e-3)
            losses.append(float(total))
    peak = torch.cuda.max_memory_allocated()
    for handle in hooks:  # each hook refers to its parameter: a cycle that would outlive the config
        handle.remove()
    del model, params, masters, opt, hooks
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return {"hidden": h, "heads": heads, "layers": layers, "batch_seqs": batch, "microbatch_seqs": mb,
            "checkpoint": checkpoint, **({"checkpoint_early_stop": False} if checkpoint else {}),
            "step_s": statistics.median(step_t), "forward_backward_s": statistics.median(fb_t),
            "optimizer_s": statistics.median(opt_t),
            "forward_s": statistics.median(fwd_t), "backward_s": statistics.median(bwd_t),
            "step_spread": (max(step_t) - min(step_t)) / statistics.median(step_t),
            "peak_bytes": peak, "losses": losses}


def main(argv):
    a, configs = parse_args(argv)
    import torch  # after the arguments: --help works without a GPU
    import torch.utils.checkpoint
    if not torch.cuda.is_available():
        sys.exit("gpu_step_check: no CUDA device (torch.cuda.is_available() is False)")
    torch.manual_seed(0)
    results = []
    for cfg in configs:
        r = time_config(torch, cfg, a.steps, a.warmup, a.checkpoint)
        results.append(r)
        print(f"{'checkpointed, ' if a.checkpoint else ''}hidden {r['hidden']}, {r['layers']} layers, batch {r['batch_seqs']} in {r['microbatch_seqs']}s: "
              f"step {r['step_s'] * 1e3:.2f} ms (fwd+bwd {r['forward_backward_s'] * 1e3:.2f}, "
              f"optimizer {r['optimizer_s'] * 1e3:.2f}), spread {100 * r['step_spread']:.1f}%, "
              f"peak {r['peak_bytes'] / 2**30:.1f} GiB, loss {r['losses'][0]:.3f}", flush=True)
    doc = {"format": "axonn-gpu-steps", "version": 1, "device": torch.cuda.get_device_name(),
           "software": f"torch {torch.__version__}, CUDA {torch.version.cuda}",
           "method": f"median of {a.steps} steps after {a.warmup}, CUDA events", "steps": results}
    tool_json.write(a.out, doc)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
