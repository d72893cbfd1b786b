"""benchmarks/bench_dependencies.py prints the dependency check's time against one untraced forward,
measured in the same run. Its structure and what held are checked, never its numbers (shared cores)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def test_the_benchmark_prints_both_medians_and_their_ratio():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_dependencies.py"), "--repeat", "3",
                           "--d-model", "64", "--heads", "4"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"untraced forward +\d+\.\d{3} ms \(median of 3\)", lines[0])
    # the reference model is correct: the contracts it can be held to hold (it declares no causal mask)
    assert re.fullmatch(r"dependency contracts +\d+\.\d{3} ms \(median of 3; held: batch entries stay apart, "
                        r"each token depends on itself, heads stay apart\)", lines[1])
    assert re.fullmatch(r"ratio +\d+\.\d{2}x one untraced forward \(load average \d+\.\d, 1 threads\)", lines[2])
