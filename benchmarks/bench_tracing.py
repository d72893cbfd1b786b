"""Tracing overhead and the meta-device whole-process cost (issue 5). Prints numbers and ratios.

    cd /work/wt-N && PYTHONPATH=. python benchmarks/bench_tracing.py [--reps 5] [--skip-large]

1. Per recorded op, in µs: (traced forward - untraced forward) / ops, at the default config
   (B=2 T=6 D=512 H=8) and at B=8 T=1024 D=1024 H=16; the large traced forward should stay
   within 1.10x the untraced one.
2. ``shapetrace run`` at a llama3-70b-sized config on the meta device (D=8192 H=64 T=32768 B=8),
   whole process, against ``python -c "import torch"``: median wall time over --reps runs
   (interleaved), and peak RSS (per child, from os.wait4); targets 1.5x and 1.3x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BIG_RUNS = {
    "run --preset llama3-70b (GQA, meta)": ["-m", "shapetrace", "run", "--preset", "llama3-70b", "--seq-len",
                                             "32768", "--batch", "8", "--width", "100"],
    "run D=8192 H=64 (reference, meta)": ["-m", "shapetrace", "run", "--d-model", "8192", "--heads", "64",
                                           "--seq-len", "32768", "--batch", "8", "--width", "100"],
}


def forward_times(config, reps: int) -> tuple[float, float, int]:
    """Median seconds of an untraced and a traced forward, and the number of recorded ops."""
    import torch

    from shapetrace.attention import reference as attention
    from shapetrace.engine.tracer import Trace

    model, x = attention.build(config)
    plain, traced, ops = [], [], 0
    with torch.no_grad():
        model(x)  # warm-up (allocator, kernels)
        for _ in range(reps):
            t0 = time.perf_counter()
            model(x)
            plain.append(time.perf_counter() - t0)
            trace = Trace(config.dims)
            t0 = time.perf_counter()
            with trace:
                trace.set_names(x, ["B", "T", "D"])
                model(x)
            traced.append(time.perf_counter() - t0)
            ops = len(trace.events)
    return plain, traced, ops


def report_overhead(label: str, config, reps: int) -> float:
    """Median and best-of (the machine is shared: the minimum is the least noisy estimate)."""
    plain, traced, ops = forward_times(config, reps)
    for how, pick in (("median", statistics.median), ("min", min)):
        p, t = pick(plain), pick(traced)
        print(f"{label:<30} {how:<6} untraced {p * 1e3:9.3f} ms  traced {t * 1e3:9.3f} ms  {ops} ops  "
              f"overhead {(t - p) / ops * 1e6:9.1f} µs/op  ratio {t / p:5.3f}x")
    return min(traced) / min(plain)


def child(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss


def report_whole_process(reps: int) -> None:
    """Interleaved runs: import torch, then each big command, ``reps`` times; medians."""
    times: dict[str, list[float]] = {"import torch": []}
    peaks: dict[str, list[int]] = {"import torch": []}
    for _ in range(reps):
        for label, argv in [("import torch", ["-c", "import torch"])] + list(BIG_RUNS.items()):
            t, m = child(argv)
            times.setdefault(label, []).append(t)
            peaks.setdefault(label, []).append(m)
    bt, bm = statistics.median(times["import torch"]), statistics.median(peaks["import torch"])
    base = "python -c 'import torch'"
    print(f"{base:<40} {bt:6.2f} s   peak RSS {bm / 1024:7.1f} MiB")
    for label in BIG_RUNS:
        rt, rm = statistics.median(times[label]), statistics.median(peaks[label])
        print(f"{label:<40} {rt:6.2f} s   peak RSS {rm / 1024:7.1f} MiB   ratios: time {rt / bt:.2f}x "
              f"(<= 1.5x), memory {rm / bm:.2f}x (<= 1.3x)")
    print(f"[medians of {reps} interleaved runs; seq-len 32768, batch 8: the scores alone would be 2 TiB]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--skip-large", action="store_true", help="skip the B=8 T=1024 D=1024 H=16 forward")
    args = parser.parse_args()
    from shapetrace.attention.config import AttentionConfig

    report_whole_process(args.reps)  # first: a child forked from a big parent inherits its peak RSS
    report_overhead("default B=2 T=6 D=512 H=8", AttentionConfig(), max(args.reps, 200))
    if not args.skip_large:
        ratio = report_overhead("large B=8 T=1024 D=1024 H=16",
                                AttentionConfig(d_model=1024, heads=16, batch=8, seq_len=1024), args.reps)
        print(f"large traced / untraced (best of {args.reps}) = {ratio:.3f}x (target <= 1.10x)")


if __name__ == "__main__":
    main()
