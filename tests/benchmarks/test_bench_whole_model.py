"""The whole-model benchmark runs, and shapetrace's overhead stays within a generous multiple of a bare
TorchFunctionMode logger's, both measured in this one run (never an absolute time).

Deselect with ``-m "not benchmark"``. A small model (4 layers, D 32, 8 tokens) so that both overheads,
not the matmuls, dominate: at the benchmark's size the bare logger's overhead is a few ms inside a
40 ms forward and the ratio is mostly noise on shared cores.
"""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_whole_model as bench  # noqa: E402

#: Measured 7x to 8x on the shared 2-core machine (medians of 31 per-round differences, thread CPU time,
#: after the second round of recording work of issue 14; 9x to 14x after the first, 14x to 47x before
#: it, in wall time); a regression past 20x fails.
MAX_OVERHEAD_RATIO = 20


#: Noise from the suite's other workers only ever adds: the best of a few runs is kept, and a true
#: regression past the bar fails every one of them.
TRIES = 3


@pytest.mark.benchmark
def test_overhead_ratio_against_a_bare_logger():
    reports = []
    for _ in range(TRIES):
        t = bench.measure(reps=31, layers=4, d_model=32, heads=4, tokens=8)
        assert t.traced_ops == 4 * 21 + 2  # every op of tests/scripts/tiny_gpt.py was recorded
        reports.append(bench.report(t, 31, "cpu"))
        if t.untraced < t.traced and t.overhead_ratio < MAX_OVERHEAD_RATIO:
            break
    else:
        pytest.fail("\n\n".join(reports))
    assert "overhead ratio (shapetrace / bare logger)" in reports[-1]
