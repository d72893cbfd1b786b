"""The cost of recording one op: shapetrace against a bare TorchFunctionMode logger, in one process (issue 14).

    PYTHONPATH=. python benchmarks/bench_per_op.py [--reps 9] [--rounds 200] [--size-reads]

One loop body of six calls on tiny tensors (an ``nn.Linear``, a view, two transposes, a matmul and an
elementwise add), run ``--rounds`` times per measurement: untraced, under a do-nothing mode (what any
TorchFunctionMode costs), under a bare logger (output shape, stride and caller's file:line) and under
``shapetrace.trace``. The tensors are tiny, so the compute is small and the per-call overheads show
with little noise. Prints µs per call (medians of ``--reps`` interleaved measurements, thread CPU time)
and the ratio of shapetrace's overhead to the bare logger's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CALLS_PER_ROUND = 6


def measure(reps: int = 9, rounds: int = 200) -> dict[str, float]:
    """µs per call of each kind (medians), measured interleaved ``reps`` times."""
    import torch
    from bench_whole_model import bare_logger
    from torch.overrides import TorchFunctionMode

    import shapetrace

    class DoNothing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    torch.set_num_threads(1)
    x = torch.randn(2, 6, 64)                                     # (B, T, D)
    proj = torch.nn.Linear(64, 192)

    def body() -> None:
        for _ in range(rounds):
            qkv = proj(x)                                         # (B, T, 3·D)
            heads = qkv.view(2, 6, 3, 64)                         # (B, T, 3, D)
            per_head = heads.transpose(1, 2)                      # (B, 3, T, D)
            scores = per_head @ per_head.transpose(-2, -1)        # (B, 3, T, T)
            scores + 1.0                                          # (B, 3, T, T)

    modes = {"untraced": None, "do-nothing mode": DoNothing, "bare logger": bare_logger,
             "shapetrace": lambda: shapetrace.trace(dims="B=2 T=6 D=64 H=3")}
    with torch.no_grad():
        times = _interleaved(body, modes, reps)
    return {k: statistics.median(v) / (rounds * CALLS_PER_ROUND) * 1e6 for k, v in times.items()}


def measure_size_reads(reps: int = 9, rounds: int = 2000) -> dict[str, float]:
    """µs per size read (``B, T, C = x.shape``, ``x.size()``, ``x.shape[-1]``: what every attention forward
    does), untraced, under a do-nothing mode and under ``shapetrace.trace``, where each read returns sizes
    that carry their axis (:mod:`shapetrace.engine.sizes`). Medians of ``reps`` interleaved runs."""
    import torch
    from torch.overrides import TorchFunctionMode

    import shapetrace

    class DoNothing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = torch.randn(2, 6, 64)                                     # (B, T, D)

    def body() -> None:
        for _ in range(rounds):
            B, T, C = x.shape                                     # noqa: F841
            x.size()
            x.shape[-1]

    times = _interleaved(body, {"untraced": None, "do-nothing mode": DoNothing,
                                "shapetrace": lambda: shapetrace.trace(dims="B=2 T=6 D=64 H=4")}, reps)
    return {k: statistics.median(v) / (rounds * 3) * 1e6 for k, v in times.items()}


def _interleaved(body, modes: dict, reps: int) -> dict[str, list[float]]:
    """Thread CPU seconds of ``body`` under each mode (a context manager factory; None: untraced), one
    warm-up each, then ``reps`` interleaved rounds."""
    def under(make) -> float:
        t0 = time.thread_time()
        if make is None:
            body()
        else:
            with make():
                body()
        return time.thread_time() - t0

    times: dict[str, list[float]] = {k: [] for k in modes}
    for make in modes.values():
        under(make)   # warm-up
    for _ in range(reps):
        for kind, make in modes.items():
            times[kind].append(under(make))
    return times


def report(per_call: dict[str, float], reps: int) -> str:
    base = per_call["untraced"]
    lines = [f"µs per call, medians of {reps} interleaved runs (thread CPU time); overhead over untraced:"]
    for kind, us in per_call.items():
        lines.append(f"  {kind:16s} {us:6.2f} µs" + ("" if kind == "untraced" else f"  (+{us - base:.2f})"))
    ratio = (per_call["shapetrace"] - base) / (per_call["bare logger"] - base)
    lines.append(f"  overhead ratio (shapetrace / bare logger): {ratio:.1f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--size-reads", action="store_true", help="also time x.shape / x.size() reads")
    args = parser.parse_args()
    print(report(measure(args.reps, args.rounds), args.reps))
    if args.size_reads:
        reads = measure_size_reads(args.reps)
        print("µs per size read (x.shape, x.size(), x.shape[-1]), medians of interleaved runs:")
        print("\n".join(f"  {kind:16s} {us:6.2f} µs" for kind, us in reads.items()))


if __name__ == "__main__":
    main()
