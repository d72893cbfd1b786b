"""A whole model, traced: shapetrace against a bare TorchFunctionMode logger, in one process (issue 14).

    cd /work/wt-N && PYTHONPATH=. python benchmarks/bench_whole_model.py [--reps 7] [--device cpu]

The model is tests/scripts/tiny_gpt.py at 12 layers, D 256, 8 heads, 64 tokens (B 1), from token ids.
Three forwards, interleaved ``--reps`` times after a warm-up: untraced; under a bare logger that records
each call's output shape, stride and the caller's file:line (the least any tracer must do); and under
``shapetrace.trace``. Each overhead is the median over the rounds of that round's difference from its own
untraced forward (shown added to the untraced median); it prints the ratio of shapetrace's overhead to
the bare logger's, and µs per recorded op. Ratios, never absolute times: the
machine is shared. No per-op synchronisation: on cuda the forward is synchronised once, at its end.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MODEL_FILE = os.path.join(ROOT, "tests", "scripts", "tiny_gpt.py")


def load_model(layers: int = 12, d_model: int = 256, heads: int = 8, device: str = "cpu", tokens: int = 64):
    """The seeded TinyGPT in eval mode and its token ids ``[1, tokens]``."""
    import torch

    spec = importlib.util.spec_from_file_location("tiny_gpt", MODEL_FILE)
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    torch.manual_seed(0)
    with torch.device(device):
        model = tiny.TinyGPT(1000, d_model, heads, layers).eval()
        ids = torch.randint(0, 1000, (1, tokens))                      # (B, T)
    return model, ids


def bare_logger():
    """A TorchFunctionMode that runs each call and records its output's shape, stride and file:line."""
    import torch
    from torch.overrides import TorchFunctionMode

    torch_dir = os.path.dirname(torch.__file__)

    class BareLogger(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.records: list[tuple] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith(torch_dir):
                frame = frame.f_back
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"
            if isinstance(out, torch.Tensor):
                self.records.append((func, tuple(out.shape), out.stride(), where))
            return out

    return BareLogger()


@dataclass
class Timings:
    """Median seconds of each forward over the interleaved runs, and how many ops each recorded."""

    untraced: float
    bare: float
    traced: float
    bare_records: int
    traced_ops: int
    events: float = 0.0     # making the events from the records, after the run (on first read)

    @property
    def overhead_ratio(self) -> float:
        """shapetrace's overhead over the untraced forward, divided by the bare logger's."""
        return (self.traced - self.untraced) / (self.bare - self.untraced)

    @property
    def overhead_with_events(self) -> float:
        """The same ratio with the cost of making the events (after the run) added to shapetrace's."""
        return (self.traced + self.events - self.untraced) / (self.bare - self.untraced)

    @property
    def us_per_op(self) -> float:
        return (self.traced - self.untraced) / self.traced_ops * 1e6


def measure(reps: int = 7, device: str = "cpu", layers: int = 12, d_model: int = 256, heads: int = 8,
            tokens: int = 64) -> Timings:
    """Interleave untraced, bare-logger and shapetrace forwards ``reps`` times after one warm-up of each."""
    import torch

    import shapetrace

    torch.set_num_threads(1)  # shared cores: one thread keeps the three series comparable
    model, ids = load_model(layers, d_model, heads, device, tokens)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {"untraced": [], "bare": [], "traced": [], "events": []}
    counts = {"bare": 0, "traced": 0}

    # CPU: this thread's CPU time, which waiting for a shared core does not inflate; GPU: wall time.
    clock = time.perf_counter if device == "cuda" else time.thread_time

    def run(kind: str) -> None:
        sync()
        t0 = clock()
        if kind == "untraced":
            model(ids)
        elif kind == "bare":
            with bare_logger() as log:
                model(ids)
        else:
            with shapetrace.trace(dims=f"B=1 T={tokens} D={d_model} H={heads}") as log:
                model(ids)
        sync()
        times[kind].append(clock() - t0)
        if kind == "traced":   # the events are made from the records on first read: timed on their own
            t1 = clock()
            counts["traced"] = len(log.events)
            times["events"].append(clock() - t1)
        elif kind == "bare":
            counts["bare"] = len(log.records)

    with torch.no_grad():
        for kind in ("untraced", "bare", "traced"):  # warm-up: allocator, kernels, first-use imports
            run(kind)
        for series in times.values():
            series.clear()
        for _ in range(reps):
            for kind in ("untraced", "bare", "traced"):
                run(kind)
    # Overheads as the median of each round's difference from that round's own untraced forward:
    # the shared machine's speed drifts between rounds more than within one.
    med = {k: statistics.median(v) for k, v in times.items()}
    bare_over = statistics.median(b - u for b, u in zip(times["bare"], times["untraced"]))
    traced_over = statistics.median(t - u for t, u in zip(times["traced"], times["untraced"]))
    return Timings(med["untraced"], med["untraced"] + bare_over, med["untraced"] + traced_over,
                   counts["bare"], counts["traced"], med["events"])


def report(t: Timings, reps: int, device: str) -> str:
    ms = 1e3
    return "\n".join([
        f"12 layers, D 256, 8 heads, 64 tokens, {device}: medians of {reps} interleaved runs "
        f"({'wall' if device == 'cuda' else 'thread CPU'} time)",
        f"  untraced forward          {t.untraced * ms:8.2f} ms",
        f"  bare TorchFunctionMode    {t.bare * ms:8.2f} ms  (+{(t.bare - t.untraced) * ms:.2f} ms, "
        f"{t.bare_records} calls logged)",
        f"  shapetrace.trace          {t.traced * ms:8.2f} ms  (+{(t.traced - t.untraced) * ms:.2f} ms, "
        f"{t.traced_ops} ops recorded, {t.us_per_op:.0f} µs per recorded op)",
        f"  then making the {t.traced_ops} events on first read: {t.events * ms:.2f} ms "
        f"({t.events / max(t.traced_ops, 1) * 1e6:.0f} µs per event)",
        f"  overhead ratio (shapetrace / bare logger): {t.overhead_ratio:.1f}x recording, "
        f"{t.overhead_with_events:.1f}x with the events made; traced / untraced: {t.traced / t.untraced:.1f}x",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    print(report(measure(args.reps, args.device), args.reps, args.device))


if __name__ == "__main__":
    main()
