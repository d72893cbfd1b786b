"""What the dependency contracts (shapetrace/engine/dependencies.py, engine/heads.py) cost, against one
untraced forward measured in the same run.

The check runs the outermost module once more: batch entry 0 beside a copy of it with its last token
moved (the token contracts), with one copy of the batch per head appended at the head splits and taken
away again at the merge (the heads contract), all in one forward. Issue 33 allows it at most one
untraced forward's time at the default sizes (the reference model of ``shapetrace run``: B=2, T=6,
D=512, H=8). The model is traced once (not timed); then the untraced forward and the check are timed
REPEAT times, interleaved, and the medians compared. Times are this thread's CPU time (torch runs on
one thread here), so other processes on shared cores slow both alike instead of whichever was waiting.

    python benchmarks/bench_dependencies.py [--repeat 21] [--d-model 512] [--heads 8] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.reference import build
from shapetrace.engine.dependencies import measure, probe_of
from shapetrace.engine.tracer import Trace


def timings(d_model: int, heads: int, repeat: int) -> tuple[float, float, list[str]]:
    """Median seconds of one untraced forward and of one dependency measurement, and what held."""
    config = AttentionConfig(d_model=d_model, heads=heads)
    model, x = build(config)
    trace = Trace(config.dims)
    trace.check_dependencies()
    with trace:
        trace.set_names(x, ["B", "T", "D"])
        model(x)
    probe = probe_of(trace, trace.capture.top_call)
    forward, check, held = [], [], []
    with torch.no_grad():
        model(x), measure(probe)   # warm both up (first calls load kernels)
        for _ in range(repeat):
            start = time.thread_time()
            model(x)
            forward.append(time.thread_time() - start)
            start = time.thread_time()
            _, held, _ = measure(probe)
            check.append(time.thread_time() - start)
    return statistics.median(forward), statistics.median(check), held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on shared cores)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    forward, check, held = timings(args.d_model, args.heads, args.repeat)
    print(f"untraced forward      {forward * 1e3:8.3f} ms (median of {args.repeat})")
    print(f"dependency contracts  {check * 1e3:8.3f} ms (median of {args.repeat}; held: {', '.join(held)})")
    print(f"ratio                 {check / forward:8.2f}x one untraced forward "
          f"(load average {os.getloadavg()[0]:.1f}, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
