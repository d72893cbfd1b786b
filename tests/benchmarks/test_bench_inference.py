"""benchmarks/bench_inference.py prints inference µs per event for each case, and against another tree
its ratio, measured in the same rounds. Its structure is checked, never its numbers (shared cores)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def test_the_benchmark_prints_each_case_against_another_tree():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_inference.py"), "--rounds", "1",
                           "--traces", "1", "--only", "D 32", "--against", str(ROOT)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("inference, µs per event: medians of 1 rounds (each the median of 1 traces in one "
                        "process), thread CPU time")
    assert len(lines) == 2
    assert re.fullmatch(r"  ladder D 32 T 8 +this +\d+\.\d  against +\d+\.\d  this/against \d+\.\d\d", lines[1])
