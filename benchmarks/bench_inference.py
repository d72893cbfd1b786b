"""Inference per event: what naming, rows and the passes after the run cost, once the run is recorded.

    PYTHONPATH=. python benchmarks/bench_inference.py [--rounds 7] [--against DIR]

The ladder's models (``bench_capture_ladder.py``: 12 pre-norm attention blocks at D 32, T 8, H 4 and at
D 256, T 64, H 8) and the corpus cases whose names a later use proves (``bench_pins.py``: static caches,
latent attention; a fused qkv width whose stack a later use decides: timm's ViT, torch's
``nn.MultiheadAttention``). Each is traced, and the thread CPU time of its first ``trace.events`` (every pass of
:mod:`shapetrace.engine.infer`, and a second walk where one is needed) is divided by its events. Each
round runs one worker process per tree (this checkout, and ``--against DIR``: another tree, such as
``git archive main | tar -x -C DIR``), interleaved, each taking the median of a few traces after two
warm-ups; printed: the median over rounds, µs per event, and the ratio to the other tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ((32, 8, 4), (256, 64, 8))
PINNED = ("static-cache-index-copy", "static-cache-slice-assignment", "mla-latent-cache-decode-step",
          "deepseek-mla-joined-queries-through-sdpa", "vit-patch-stem-fused-sdpa", "mha-average-attn-weights")


def worker(root: str, traces: int, only: str = "") -> dict[str, list[float]]:
    """µs per event of ``traces`` traces of each case (those whose name holds ``only``), with the code
    of ``root``."""
    sys.path[:0] = [root, os.path.join(root, "benchmarks")]
    import torch
    from bench_engine import build_model

    import shapetrace
    from tests.corpus import test_decoding, test_library_styles, test_reductions, test_vision
    from tests.corpus.helpers import trace_case

    torch.set_num_threads(1)
    cases = {}
    for d, t, h in MODELS:
        model, x = build_model(12, d, h), torch.randn(1, t, d)                     # (B, T, D)

        def ladder(model=model, x=x, d=d, t=t, h=h):
            with torch.no_grad(), shapetrace.trace(dims=f"B=1 T={t} D={d} H={h}") as tr:
                model(x)
            return tr
        cases[f"ladder D {d} T {t}"] = ladder
    for case in test_decoding.CASES + test_library_styles.CASES + test_vision.CASES + test_reductions.CASES:
        if case.id in PINNED:
            cases[case.id] = lambda case=case: trace_case(case)
    found = {}
    for name, make in cases.items():
        if only not in name:
            continue
        times = []
        for n in range(traces + 2):
            tr = make()
            start = time.thread_time()
            events = len(tr.events)
            if n >= 2:   # (two warm-ups)
                times.append((time.thread_time() - start) * 1e6 / events)
        found[name] = times
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--traces", type=int, default=3, help="traces per case in each worker (median)")
    parser.add_argument("--against", help="another tree to measure in the same rounds")
    parser.add_argument("--only", default="", help="only the cases whose name holds this text")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.traces, args.only)))
        return
    trees = {"this": ROOT} | ({"against": os.path.abspath(args.against)} if args.against else {})
    medians: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
    for round_ in range(args.rounds):
        for kind in (list(trees) if round_ % 2 else list(trees)[::-1]):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", trees[kind],
                                  "--traces", str(args.traces), "--only", args.only], capture_output=True,
                                 text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": trees[kind], "OMP_NUM_THREADS": "1"})
            for case, times in json.loads(out.stdout.splitlines()[-1]).items():
                medians[kind].setdefault(case, []).append(statistics.median(times))
    print(f"inference, µs per event: medians of {args.rounds} rounds (each the median of {args.traces} "
          "traces in one process), thread CPU time")
    for case in medians["this"]:
        mine = statistics.median(medians["this"][case])
        line = f"  {case:42s} this {mine:7.1f}"
        if "against" in trees:
            theirs = statistics.median(medians["against"][case])
            line += f"  against {theirs:7.1f}  this/against {mine / theirs:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
