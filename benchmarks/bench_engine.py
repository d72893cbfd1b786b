"""Recording and every derived fact, against a bare TorchFunctionMode logger, in one run (issue 21).

    PYTHONPATH=. python benchmarks/bench_engine.py [--rounds 15] [--layers 12]

For each model size (12 pre-norm attention blocks at D 32, T 8, where the per-op cost shows, and at
D 256, T 64), one process, one thread, times five forwards interleaved round by round:

  untraced     the model alone
  bare         a bare TorchFunctionMode logger (op, output shape and stride, caller's file and line)
  floor        a capture-only recorder (op, call site, every operand's and result's layout and storage,
               the other arguments; nothing derived): what a pure-Python recorder cannot go below
  with         ``with shapetrace.trace(...)`` around the forward (recording only)
  all facts    the same, then ``trace.to_dict()`` (names, events, labels, diagnostics, JSON data)

Each overhead is the median over the rounds of that round's time minus its own untraced forward
(thread CPU time: waiting for a shared core does not count). Ratios are to the bare logger's overhead;
then what ``to_dict()`` costs per event, step by step (one more traced forward per round, timed apart);
the last line of each block is the traced-with-every-fact forward over the untraced one.
Targets (issue 21): with ≤ 3×, all facts ≤ 5×, and at D 256 traced / untraced ≤ 1.3×.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

#: (D, T, H) of each model, the small one first
SIZES = ((32, 8, 4), (256, 64, 8))
KINDS = ("untraced", "bare", "floor", "with", "all facts")


def build_model(layers: int, d_model: int, heads: int):
    """``layers`` pre-norm blocks (multi-head attention, then a GELU MLP), seeded, in eval mode."""
    import torch
    from torch import nn

    class MHA(nn.Module):
        def __init__(self, d: int, h: int):
            super().__init__()
            self.h, self.dk = h, d // h
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

        def split(self, t, B, T):
            return t.view(B, T, self.h, self.dk).transpose(1, 2)                 # (B, H, T, d_k)

        def forward(self, x):
            B, T, D = x.shape                                                    # (B, T, D)
            q, k, v = self.split(self.q(x), B, T), self.split(self.k(x), B, T), self.split(self.v(x), B, T)
            w = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).softmax(-1)       # (B, H, T, T)
            y = (w @ v).transpose(1, 2).contiguous().view(B, T, D)               # (B, T, D)
            return self.o(y)

    class Block(nn.Module):
        def __init__(self, d: int, h: int):
            super().__init__()
            self.attn, self.n1, self.n2 = MHA(d, h), nn.LayerNorm(d), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.n1(x))                                        # (B, T, D)
            return x + self.mlp(self.n2(x))                                      # (B, T, D)

    torch.manual_seed(0)
    return nn.Sequential(*[Block(d_model, heads) for _ in range(layers)]).eval()


def bare_logger():
    """Each call's op, output shape and stride, and the caller's file and line."""
    from torch import Tensor
    from torch.overrides import TorchFunctionMode

    class Bare(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.rows: list[tuple] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, Tensor):
                frame = sys._getframe(1)
                self.rows.append((func, tuple(out.shape), out.stride(), frame.f_code.co_filename, frame.f_lineno))
            return out

    return Bare()


def capture_floor(site=None):
    """A capture-only recorder: every operand's and result's layout and storage, the other arguments,
    the call site (code object and ``f_lasti`` of the first frame outside torch). Nothing derived.
    ``site``: another way to read the call site, called as the first-frame reader is (no argument,
    from inside the mode; ``bench_capture_ladder.py`` passes the user's whole stack)."""
    import torch
    from torch import Tensor
    from torch.overrides import TorchFunctionMode

    torch_dir = os.path.dirname(torch.__file__)
    outside: dict = {}

    def call_site():
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            known = outside.get(code)
            if known is None:
                known = outside[code] = not code.co_filename.startswith(torch_dir)
            if known:
                return code, frame.f_lasti
            frame = frame.f_back
        return None

    def layout(t):
        return t.shape, t.stride(), t.untyped_storage().data_ptr(), t.storage_offset(), t.dtype

    where = call_site if site is None else site

    class Floor(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.rows: list[tuple] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            ins = tuple(layout(a) if isinstance(a, Tensor) else a for a in args)
            self.rows.append((func, ins, kwargs, layout(out) if isinstance(out, Tensor) else out, where()))
            return out

    return Floor()


def measure(layers: int, d_model: int, tokens: int, heads: int, rounds: int) -> dict:
    """Per kind, the median seconds of the forward (untraced) or of its overhead over the same round's
    untraced forward; plus the op counts."""
    import torch

    import shapetrace

    model = build_model(layers, d_model, heads)
    x = torch.randn(1, tokens, d_model)                                          # (B, T, D)
    dims = f"B=1 T={tokens} D={d_model} H={heads}"
    counts = {}

    def run(kind: str) -> float:
        start = time.thread_time()
        if kind == "untraced":
            model(x)
        elif kind == "bare":
            with bare_logger() as log:
                model(x)
            counts["calls"] = len(log.rows)
        elif kind == "floor":
            with capture_floor():
                model(x)
        elif kind == "with":
            with shapetrace.trace(dims=dims):
                model(x)
        else:
            with shapetrace.trace(dims=dims) as trace:
                model(x)
            data = trace.to_dict()
            counts["events"] = len(data["events"])
            counts["diagnostics"] = len(data["diagnostics"])
        return time.thread_time() - start

    def stages() -> list[float]:
        """The derived facts one at a time, in the order ``to_dict`` needs them (seconds each)."""
        with shapetrace.trace(dims=dims) as trace:
            model(x)
        marks = [time.thread_time()]
        for step in STAGES.values():
            step(trace)
            marks.append(time.thread_time())
        return [b - a for a, b in zip(marks, marks[1:])]

    times: dict[str, list[float]] = {k: [] for k in KINDS}
    with torch.no_grad():
        for kind in KINDS:   # warm-up: allocator, kernels, first-use imports
            run(kind), run(kind)
        split = []
        for _ in range(rounds):
            for kind in KINDS:
                times[kind].append(run(kind))
            split.append(stages())
    untraced = times["untraced"]
    result = {"untraced": statistics.median(untraced)}
    for kind in KINDS[1:]:
        result[kind] = statistics.median(t - u for t, u in zip(times[kind], untraced))
    result.update(counts)
    result["stages"] = [statistics.median(column) for column in zip(*split)]
    return result


def _labels(trace) -> list:
    return [info.dims for event in trace.events for info in (*event.inputs, *event.outputs)]


def _sites_and_args(trace) -> list:
    return [(event.source, event.args) for event in trace.events]


#: what ``to_dict`` derives, step by step: each step reads what the ones before it made
STAGES = {
    "events": lambda trace: trace.events,
    "labels": _labels,
    "sites+args": _sites_and_args,
    "diagnostics": lambda trace: trace.diagnostics,
    "json": lambda trace: trace.to_dict(),
}


def report(m: dict, layers: int, d_model: int, tokens: int, heads: int, rounds: int) -> str:
    """The block printed for one model size."""
    ms, bare, calls = 1e3, m["bare"], m["calls"]
    lines = [f"{layers} layers, D {d_model}, T {tokens}, H {heads}: medians of {rounds} interleaved rounds, "
             f"1 thread, thread CPU time; {calls} calls, {m['events']} events, {m['diagnostics']} diagnostics",
             f"  untraced forward                {m['untraced'] * ms:9.2f} ms"]
    for kind, label, target in (("bare", "bare logger overhead", None),
                                ("floor", "capture floor overhead", None),
                                ("with", "shapetrace `with` overhead", 3),
                                ("all facts", "`with` + to_dict() overhead", 5)):
        over = m[kind]
        line = (f"  {label:30s}  {over * ms:9.2f} ms  {over / calls * 1e6:7.1f} µs/call  "
                f"ratio {over / bare:6.2f}x bare")
        lines.append(line + (f"  (target <= {target}x)" if target else ""))
    events = max(m["events"], 1)
    lines.append("  to_dict() by step, µs per event: " + ", ".join(
        f"{name} {seconds / events * 1e6:.1f}" for name, seconds in zip(STAGES, m["stages"])))
    whole = (m["untraced"] + m["all facts"]) / m["untraced"]
    lines.append(f"  traced with every fact / untraced: ratio {whole:.2f}x  (target <= 1.3x at D 256)")
    return "\n".join(lines)


def run_sizes(description: str, measure, report, rounds: int, argv: list[str] | None = None) -> None:
    """The command line both engine benchmarks share: ``--rounds``, ``--layers``, ``--sizes``; one
    thread; for each size, ``measure(layers, D, T, H, rounds)`` and its ``report`` block printed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--sizes", default=",".join(f"{d}x{t}x{h}" for d, t, h in SIZES),
                        help="D x T x H of each model, comma-separated (default: %(default)s)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)   # shared cores: one thread keeps the series comparable
    for n, size in enumerate(args.sizes.split(",")):
        d_model, tokens, heads = (int(v) for v in size.split("x"))
        m = measure(args.layers, d_model, tokens, heads, args.rounds)
        print(("\n" if n else "") + report(m, args.layers, d_model, tokens, heads, args.rounds), flush=True)


def main(argv: list[str] | None = None) -> None:
    run_sizes(__doc__.splitlines()[0], measure, report, rounds=15, argv=argv)


if __name__ == "__main__":
    main()
