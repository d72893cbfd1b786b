"""The per-op benchmark runs, and recording one op stays within a multiple of what a bare
TorchFunctionMode logger costs, both measured in this one run (never an absolute time).

Deselect with ``-m "not benchmark"``. Tiny tensors, so the per-call overheads, not the compute,
are what is measured; the ratio is steadier than the whole model's.
"""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_per_op as bench  # noqa: E402

#: Measured 4x to 5x on the shared 2-core machine (medians of 9, thread CPU time) after the recording
#: work of issue 14 (6.3x before it); a regression past 9x fails.
MAX_OVERHEAD_RATIO = 9


@pytest.mark.benchmark
def test_recording_one_op_costs_a_bounded_multiple_of_a_bare_logger():
    per_call = bench.measure(reps=9, rounds=100)
    base = per_call["untraced"]
    # (a do-nothing mode costs well under a microsecond a call more than no mode: under load the two
    # medians swapped, 11.76 against 12.27 µs, so only the logger is held above both)
    assert per_call["bare logger"] > max(base, per_call["do-nothing mode"])
    ratio = (per_call["shapetrace"] - base) / (per_call["bare logger"] - base)
    assert ratio < MAX_OVERHEAD_RATIO, bench.report(per_call, 9)
    assert bench.report(per_call, 9).splitlines()[-1].startswith("  overhead ratio (shapetrace / bare logger): ")
