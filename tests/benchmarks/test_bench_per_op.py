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


#: A run shares the machine with the suite's other workers, whose load can nearly double one run's
#: ratio (CI: 9.4x once, 4.1x to 4.6x alone on the same code); noise only ever adds, so the best of a
#: few runs is kept, and a true regression past the bar fails every one of them.
TRIES = 3


def _overhead_ratio(per_call: dict[str, float]) -> float | None:
    """shapetrace's overhead over the bare logger's; None when this run's medians are out of order."""
    base = per_call["untraced"]
    # (a do-nothing mode costs well under a microsecond a call more than no mode: under load the two
    # medians swapped, 11.76 against 12.27 µs, so only the logger is held above both)
    if per_call["bare logger"] <= max(base, per_call["do-nothing mode"]):
        return None
    return (per_call["shapetrace"] - base) / (per_call["bare logger"] - base)


@pytest.mark.benchmark
def test_recording_one_op_costs_a_bounded_multiple_of_a_bare_logger():
    reports = []
    for _ in range(TRIES):
        per_call = bench.measure(reps=9, rounds=100)
        reports.append(bench.report(per_call, 9))
        ratio = _overhead_ratio(per_call)
        if ratio is not None and ratio < MAX_OVERHEAD_RATIO:
            break
    else:
        pytest.fail("\n\n".join(reports))
    assert reports[-1].splitlines()[-1] == f"  overhead ratio (shapetrace / bare logger): {ratio:.1f}x"


def test_a_run_with_its_medians_out_of_order_is_not_judged():
    assert _overhead_ratio({"untraced": 7.0, "do-nothing mode": 8.0, "bare logger": 7.5, "shapetrace": 30.0}) is None
    assert _overhead_ratio({"untraced": 7.0, "do-nothing mode": 8.0, "bare logger": 11.0, "shapetrace": 43.0}) == 9.0
