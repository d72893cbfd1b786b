"""The walk with pins: the inference of a trace whose names a later use proves, per event, in one run.

    PYTHONPATH=. python benchmarks/bench_pins.py [--rounds 11] [CASE ...]

A static cache's buffers are named by the writes into them, a latent attention's heads by the q·k
product (tests/corpus: ``static-cache-*``, ``mla-*``, ``deepseek-mla-*``); the names are pinned, and the
records are walked again where a pin changes what a record before it read, or where a use decided a
fused width's stack (timm's ViT, ``nn.MultiheadAttention``) after a record read its pieces' labels
(:func:`shapetrace.engine.infer.state.corrected`). Timed, interleaved round by round in one process:
``fresh``, a second walk made from nothing wherever there are pins (as it was), ``reused``, a second
walk wherever there are pins that answers every call the pins do not reach from the first walk's
memos, and ``needed``, a second walk (as ``reused``) only where a pin changes what was read (today's).
Thread CPU time of ``trace.events`` (the walks, the corrections between them), medians, µs per event.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CASES = ("static-cache-index-copy", "static-cache-slice-assignment", "mla-latent-cache-decode-step",
         "mla-low-rank-queries-T-equals-H", "deepseek-mla-joined-queries-through-sdpa", "vit-patch-stem-fused-sdpa",
         "mha-average-attn-weights")


def fresh(inference):
    """The second walk as it was: a new inference with the pins, nothing reused."""
    from shapetrace.engine.infer import corrections, state

    pins = corrections.corrections(inference)
    if not pins and not inference.namer.decided:
        return inference
    again = state.Inference(inference.capture, inference.namer, inference.dims, inference.seed_order, pins)
    again.finish()
    return again


def reused(inference):
    """A second walk wherever there are pins, answered from the first walk's memos where they do not reach."""
    from shapetrace.engine.infer import corrections, state

    pins = corrections.corrections(inference)
    if not pins and not inference.namer.decided:
        return inference
    again = state.Inference(inference.capture, inference.namer, inference.dims, inference.seed_order, pins)
    if not inference.namer.decided:
        again.name_memo, again.interned = inference.name_memo, inference.interned
        again.clash_memo, again.elements = inference.clash_memo, inference.elements.reused()
    again.finish()
    return again


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("cases", nargs="*", default=list(CASES))
    args = parser.parse_args(argv)
    from shapetrace.engine.infer import state
    from shapetrace.engine.infer.state import corrected
    from tests.corpus import test_decoding, test_library_styles, test_reductions, test_vision
    from tests.corpus.helpers import trace_case

    corpus = test_decoding.CASES + test_library_styles.CASES + test_vision.CASES + test_reductions.CASES
    cases = [c for c in corpus if c.id in args.cases]
    walks = {"fresh": fresh, "reused": reused, "needed": corrected}
    times = {(c.id, k): [] for c in cases for k in walks}
    events = {}
    for round_ in range(args.rounds):
        for case in cases:
            for kind in (list(walks) if round_ % 2 else list(walks)[::-1]):
                state.corrected = walks[kind]
                trace = trace_case(case)
                start = time.thread_time()
                events[case.id] = len(trace.events)
                times[(case.id, kind)].append(time.thread_time() - start)
    state.corrected = corrected
    print(f"medians of {args.rounds} interleaved rounds, thread CPU time, µs per event")
    for case in cases:
        old, again, new = (statistics.median(times[(case.id, k)]) * 1e6 / events[case.id] for k in walks)
        print(f"  {case.id:42s} {events[case.id]:3d} events  fresh {old:7.0f}  reused {again:7.0f}  "
              f"needed {new:7.0f}  needed/fresh {new / old:.2f}")


if __name__ == "__main__":
    main()
