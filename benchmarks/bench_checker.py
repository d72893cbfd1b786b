"""Wall time of sandboxed checks, as ratios to a correct answer's check measured in the same run.

    python benchmarks/bench_checker.py [--limit 2] [--rounds 3]

Prints, per kind of learner file, the median wall time of one ``check_job`` and its ratio to the
reference solution's check (a sandbox start, torch's import, every case). The tests assert why a
check stopped (``stopped_by``), never how long it took: wall time depends on the machine's load.

Then how a check starts: forked from the fork server (:mod:`shapetrace.exercises.forks`) against a
sandbox of its own per check (``SHAPETRACE_NO_FORK_SERVER=1``, as every check started before), for a
function exercise (one child) and a learner-written test (one child per implementation), with
``python -c "import torch"`` as the baseline, all measured in the same run, interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shapetrace.exercises.checker import Job, check_job
from shapetrace.exercises.content import load

FILES = {
    "endless loop (the child's alarm)": "def split_heads(x, heads):\n    while True:\n        pass\n",
    "alarm ignored (the parent's deadline)": "import signal\ndef split_heads(x, heads):\n"
                                             "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                             "    while True:\n        x = x + 1\n",
}


def timed(exercise: str, path: Path, lessons: Path, limit: float) -> tuple[float, str]:
    start = time.perf_counter()
    v = check_job(Job(exercise, str(path)), lessons, time_limit=limit, memory_mb=512)
    return time.perf_counter() - start, f"{v['verdict']} ({v.get('stopped_by') or '-'})"


def _import_torch() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.perf_counter() - start


def starts(curriculum, rounds: int) -> None:
    """Forked from the server against a sandbox per check, for one child and for one per implementation."""
    jobs = {"split-heads (1 child)": "split-heads", "test-split-square (5 children)": "test-split-square"}
    times: dict[str, list[float]] = {"python -c 'import torch'": []}
    for label in jobs:
        times[f"{label}, own sandbox"], times[f"{label}, forked"] = [], []
    check_job(Job("split-heads", str(curriculum.exercise("split-heads").solution)), curriculum.root)  # server up
    for _ in range(rounds):
        times["python -c 'import torch'"].append(_import_torch())
        for label, exercise in jobs.items():
            job = Job(exercise, str(curriculum.exercise(exercise).solution))
            for mode, flag in (("own sandbox", "1"), ("forked", "0")):
                os.environ["SHAPETRACE_NO_FORK_SERVER"] = flag
                start = time.perf_counter()
                v = check_job(job, curriculum.root)
                times[f"{label}, {mode}"].append(time.perf_counter() - start)
                assert v["verdict"] == "pass", v
    os.environ.pop("SHAPETRACE_NO_FORK_SERVER", None)
    base = statistics.median(times["python -c 'import torch'"])
    print(f"\nhow a check starts, medians of {rounds} interleaved rounds (the reference solution; server already up)")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<48} {med:7.3f} s  {med / base:6.2f}x import torch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    curriculum = load()
    reference = curriculum.exercise("split-heads").solution
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"reference solution": reference}
        for i, (name, text) in enumerate(FILES.items()):
            paths[name] = Path(tmp) / f"f{i}.py"
            paths[name].write_text(text)
        times: dict[str, list[float]] = {name: [] for name in paths}
        verdicts: dict[str, str] = {}
        for _ in range(args.rounds):  # interleaved: a load spike hits every kind alike
            for name, path in paths.items():
                took, verdicts[name] = timed("split-heads", path, curriculum.root, args.limit)
                times[name].append(took)
    base = statistics.median(times["reference solution"])
    print(f"split-heads, --time-limit {args.limit:g}, medians of {args.rounds} interleaved rounds")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<40} {med:7.2f} s  ratio {med / base:5.2f}x reference  "
              f"{med / args.limit:5.2f}x limit  {verdicts[name]}")
    starts(curriculum, max(args.rounds, 5))


if __name__ == "__main__":
    main()
