"""What the dependency contracts (shapetrace/engine/dependencies.py) cost, against one untraced forward
measured in the same run.

The check runs the outermost module once more on a batch of two (batch entry 0 and a copy of it with
its last token moved: one forward at batch 2). Issue 33 allows it at most one
untraced forward's time at the default sizes (the reference model of ``shapetrace run``: B=2, T=6,
D=512, H=8). Both are timed REPEAT times, interleaved, and the medians compared.

    python benchmarks/bench_dependencies.py [--repeat 21] [--d-model 512] [--heads 8]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.reference import build
from shapetrace.engine.dependencies import Probe, measure


def timings(d_model: int, heads: int, repeat: int) -> tuple[float, float, list[str]]:
    """Median seconds of one untraced forward and of one dependency measurement, and what held."""
    model, x = build(AttentionConfig(d_model=d_model, heads=heads))
    probe = Probe(model, (x,), {}, 0, batch=0, tokens=1, out_batch=0, out_tokens=1, output=model(x))
    forward, check, held = [], [], []
    with torch.no_grad():
        model(x), measure(probe)   # warm both up (first calls load kernels and vmap's rules)
        for _ in range(repeat):
            start = time.perf_counter()
            model(x)
            forward.append(time.perf_counter() - start)
            start = time.perf_counter()
            _, held, _ = measure(probe)
            check.append(time.perf_counter() - start)
    return statistics.median(forward), statistics.median(check), held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    args = parser.parse_args()
    forward, check, held = timings(args.d_model, args.heads, args.repeat)
    print(f"untraced forward      {forward * 1e3:8.3f} ms (median of {args.repeat})")
    print(f"dependency contracts  {check * 1e3:8.3f} ms (median of {args.repeat}; held: {', '.join(held)})")
    print(f"ratio                 {check / forward:8.2f}x one untraced forward")


if __name__ == "__main__":
    main()
