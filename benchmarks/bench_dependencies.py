"""What the dependency contracts (shapetrace/engine/dependencies.py, engine/heads.py) cost, against one
untraced forward measured in the same run.

The check runs the outermost module once more: batch entry 0 beside a copy of it with its last token
moved (the token contracts), with copies of entry 0 (one per head; fewer above 4 heads: 5 at H = 8) appended to
the outputs of the q, k and v projections and taken away again at the output projection's input (the
heads contract: module wrappers, where the trace proves the split reshapes a projection's output;
engine/head_hooks.py), all in one forward. Where that is not proven, or something broke, the heads are
moved at the splits and read at the merge through a TorchFunctionMode (engine/heads.py, "the full way":
one copy of the batch per head). Issue 33 allows the check at most one untraced forward's time at the
default sizes (the reference model of ``shapetrace run``: B=2, T=6, D=512, H=8). The model is traced
once (not timed); then the untraced forward and the check are timed REPEAT times, interleaved in a
shuffled order, each after an untimed forward (a forward timed right after a check ran 30-50% slower:
it pays for the memory the check gave back; in a fixed order the untraced forward always came right
after the heaviest row), and the medians compared. Times are this thread's CPU time (torch runs on one
thread here), so other processes on shared cores slow both alike instead of whichever was waiting.

Beside them, the floor: one forward of the batch with a token moved and nothing compared, which any
check on the values that runs the model once costs at least; and every contract the full way, which
models whose structure the trace does not prove (a projection called twice, a fused projection with
grouped-query heads) and any model with a finding cost. A causal attention pays one more forward at batch 2
(engine/mixing.py: its tokens must meet, and moving the last token cannot show that there): ``--style nanogpt``
times it.

``--style nanogpt`` and ``--style llama`` time the same rows on attentions whose splits read the batch
size from the block's input (nanoGPT's fused ``c_attn`` split and ``view(B, T, nh, hs)``; Llama's
``view(*input_shape, -1, head_dim)``): there the copies enter with the input (engine/head_hooks.py).
``--style llama-gqa``: Llama with H/4 key/value heads through ``repeat_kv`` (at module boundaries each
copy moves one head of q, k or v: H + 2·H_kv copies).

    python benchmarks/bench_dependencies.py [--repeat 21] [--d-model 512] [--heads 8] [--threads 1] [--parts]
                                            [--style reference|nanogpt|llama|llama-gqa]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from dataclasses import fields, replace

import torch

from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.reference import build
from shapetrace.engine.dependencies import measure, probe_of
from shapetrace.engine.tracer import Trace


def timings(d_model: int, heads: int, repeat: int, style: str = "reference") -> tuple[dict[str, float], list[str]]:
    """Median seconds of one untraced forward and of each competitor, and what held.

    The competitors, timed interleaved in one loop (so load slows them alike): the simplest check on
    the values (one forward of the batch with a token moved, under no_grad, nothing compared: the floor
    of any check that runs the model once), the token contracts alone, every contract, every contract
    with its planning (where the heads split and merge, which module boundaries to wrap: what a trace
    pays once), and every contract the full way."""
    model, x, trace, probe = _traced(d_model, heads, style)
    moved = x.clone()
    moved[-1, -1] += 1.0                                                            # (B, T, D), one token moved
    tokens, full, call = _without(probe, "heads", "hooks"), _without(probe, "hooks"), trace.capture.top_call
    runs = {"untraced forward": lambda: model(x), "one forward, a token moved": lambda: model(moved),
            "token contracts": lambda: measure(tokens), "every contract": lambda: measure(probe),
            "every contract, planned too": lambda: measure(probe_of(trace, call)),
            "every contract, the full way": lambda: measure(full)}
    return _timed(runs, model, x, repeat), measure(probe)[1]


def parts(d_model: int, heads: int, repeat: int) -> dict[str, float]:
    """Median seconds of the parts of every contract (``--parts``; this tree only): the forward, the
    same with one row per head added in the attention core by a plain ``cat``, the same with the
    copies made as the check makes them (nothing compared), the isolation alone, the planning, the token
    contracts and every contract."""
    from shapetrace.engine import head_hooks
    from shapetrace.engine.module_state import Isolated

    model, x, trace, probe = _traced(d_model, heads)
    capture, hooks = trace.capture, probe.hooks

    def rows_added():
        def appended(forward):
            def run(a):
                r = forward(a)                                                     # (B, T, D)
                return torch.cat([r, r[:1].expand(heads, *r.shape[1:])])           # (B + H, T, D)
            return run

        def cut(forward):
            return lambda a: forward(a[:x.shape[0]])                               # (B, T, D)

        wrapped = [model.get_submodule(p.path) for h in hooks for p in h.producers]
        out = model.get_submodule(hooks[0].consumer.path)
        for sub, wrap in [*[(sub, appended) for sub in wrapped], (out, cut)]:
            sub.forward = wrap(sub.forward)
        model(x)
        for sub in [*wrapped, out]:
            del sub.__dict__["forward"]

    def copies_made():
        compare, head_hooks._apart = head_hooks._apart, lambda *_: True
        try:
            head_hooks.Run(model, hooks, 0).forward(model, x)
        finally:
            head_hooks._apart = compare

    def isolated():
        with Isolated(model):
            pass

    runs = {"forward": lambda: model(x), "one row per head added in the core": rows_added,
            "the copies made, nothing compared": copies_made, "isolation alone": isolated,
            "planning (head_hooks.points)": lambda: head_hooks.points(
                capture.records, capture.nodes, capture.top_span, capture.module_calls.path, probe.heads),
            "token contracts": lambda: measure(_without(probe, "heads", "hooks")),
            "every contract": lambda: measure(probe)}
    return _timed(runs, model, x, repeat)


def _traced(d_model: int, heads: int, style: str = "reference") -> tuple:
    config = AttentionConfig(d_model=d_model, heads=heads)
    model, x = build(config)
    if style != "reference":
        torch.manual_seed(0)
        model = STYLES[style](d_model, heads).eval()
    trace = Trace(config.dims)
    trace.check_dependencies()
    with trace:
        trace.set_names(x, ["B", "T", "D"])
        model(x)
    return model, x, trace, probe_of(trace, trace.capture.top_call)


class NanoGPT(torch.nn.Module):
    """karpathy/nanoGPT model.py CausalSelfAttention: ``c_attn(x).split(n_embd, dim=2)``, ``view(B, T,
    nh, hs)`` with B, T read from the block's input, the flash path (``is_causal=True``)."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.c_attn, self.c_proj = torch.nn.Linear(d_model, 3 * d_model), torch.nn.Linear(d_model, d_model)
        self.n_head, self.n_embd = heads, d_model

    def forward(self, x):
        B, T, C = x.size()                                                         # (B, T, C)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                         # (B, T, C) each
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))          # (B, T, C)


class Llama(torch.nn.Module):
    """transformers' LlamaAttention, eager, without rotary: ``view(*input_shape, -1, head_dim)``, an
    additive causal mask, ``reshape(*input_shape, -1).contiguous()`` into ``o_proj``."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.head_dim = d_model // heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            torch.nn.Linear(d_model, d_model, bias=False) for _ in range(4))

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]                                     # (B, T)
        hidden_shape = (*input_shape, -1, self.head_dim)                           # (B, T, -1, d)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        T = q.shape[2]
        w = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5              # (B, H, T, T)
        w = torch.softmax(w + torch.full((T, T), float("-inf")).triu(1), dim=-1)   # (B, H, T, T)
        out = torch.matmul(w, v).transpose(1, 2)                                   # (B, T, H, d)
        return self.o_proj(out.reshape(*input_shape, -1).contiguous())             # (B, T, D)


class LlamaGqa(Llama):
    """The same with grouped-query heads: k and v projected to a quarter of the heads and widened by
    transformers' ``repeat_kv`` (an axis of one inserted, expanded, folded into the heads)."""

    def __init__(self, d_model: int, heads: int):
        super().__init__(d_model, heads)
        self.kv_heads = max(1, heads // 4)
        self.k_proj, self.v_proj = (torch.nn.Linear(d_model, self.kv_heads * self.head_dim, bias=False)
                                    for _ in range(2))
        self.n_rep = heads // self.kv_heads

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]                                     # (B, T)
        hidden_shape = (*input_shape, -1, self.head_dim)                           # (B, T, -1, d)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        k = self.repeat_kv(self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2))   # (B, H, T, d)
        v = self.repeat_kv(self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2))   # (B, H, T, d)
        T = q.shape[2]
        w = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5              # (B, H, T, T)
        w = torch.softmax(w + torch.full((T, T), float("-inf")).triu(1), dim=-1)   # (B, H, T, T)
        out = torch.matmul(w, v).transpose(1, 2)                                   # (B, T, H, d)
        return self.o_proj(out.reshape(*input_shape, -1).contiguous())             # (B, T, D)

    def repeat_kv(self, x):
        batch, kv_heads, slen, head_dim = x.shape                                  # (B, H_kv, T, d)
        x = x[:, :, None, :, :].expand(batch, kv_heads, self.n_rep, slen, head_dim)   # (B, H_kv, n_rep, T, d)
        return x.reshape(batch, kv_heads * self.n_rep, slen, head_dim)             # (B, H, T, d)


#: ``--style``: attentions whose splits read the batch size from the block's input
STYLES = {"nanogpt": NanoGPT, "llama": Llama, "llama-gqa": LlamaGqa}


def _timed(runs: dict, model, x, repeat: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    with torch.no_grad():
        for run in runs.values():   # warm up (first calls load kernels)
            run()
        order = random.Random(0)
        for _ in range(repeat):
            names = list(runs)
            order.shuffle(names)   # (whichever runs first after a check pays for the pages it gave back)
            for name in names:
                model(x)
                start = time.thread_time()
                runs[name]()
                times[name].append(time.thread_time() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def _without(probe, *plans: str):
    """``probe`` without the named plans (``"hooks"``: the heads moved the full way); a tree whose
    probe has no such field (main before engine/head_hooks.py) measures the full way already."""
    names = {f.name for f in fields(probe)}
    return replace(probe, **{name: () for name in plans if name in names})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on shared cores)")
    parser.add_argument("--parts", action="store_true", help="what each part of every contract costs")
    parser.add_argument("--style", default="reference", choices=["reference", *STYLES],
                        help="the model: shapetrace's reference, or a nanoGPT- or Llama-style attention")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.parts:
        medians = parts(args.d_model, args.heads, args.repeat)
        forward = medians["forward"]
        for name, median in medians.items():
            print(f"{name:36} {median * 1e3:8.3f} ms  {median / forward:5.2f}x")
        print(f"(medians of {args.repeat}, thread CPU time; load average {os.getloadavg()[0]:.1f})")
        return
    medians, held = timings(args.d_model, args.heads, args.repeat, args.style)
    forward = medians["untraced forward"]
    for name, median in medians.items():
        print(f"{name:28} {median * 1e3:8.3f} ms  {median / forward:5.2f}x")
    style = "" if args.style == "reference" else f"{args.style}; "
    print(f"({style}medians of {args.repeat}, thread CPU time; held: {', '.join(held)}; load average "
          f"{os.getloadavg()[0]:.1f}, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
