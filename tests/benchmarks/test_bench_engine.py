"""benchmarks/bench_engine.py runs in one process and prints, for each model size, every overhead with
its ratio to the bare logger's as a number, and the traced-with-every-fact / untraced ratio.

The structure of the output is checked, never its numbers (timings on shared cores): tiny settings
(2 layers, 2 rounds) keep it to a few seconds.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, script_forked

NUMBER = r"(-?\d+\.\d+)"
OVERHEAD_LINE = re.compile(rf"^  (.+?)\s+{NUMBER} ms\s+{NUMBER} µs/call\s+ratio\s+{NUMBER}x bare"
                           r"(  \(target <= (\d)x\))?$")
HEADER = re.compile(r"^2 layers, D (\d+), T (\d+), H (\d+): medians of 2 interleaved rounds, 1 thread, thread CPU "
                    r"time; (\d+) calls, (\d+) events, (\d+) diagnostics$")


@pytest.fixture(scope="module")
def output() -> str:
    done = script_forked(ROOT / "benchmarks" / "bench_engine.py", "--rounds", "2",
                         "--layers", "2", "--sizes", "16x4x2,32x8x4", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.benchmark
def test_one_block_per_size_with_every_figure_as_a_number(output):
    blocks = output.strip().split("\n\n")
    assert len(blocks) == 2
    for block, (d, t, h) in zip(blocks, ((16, 4, 2), (32, 8, 4))):
        lines = block.splitlines()
        assert len(lines) == 8, block
        header = HEADER.match(lines[0])
        assert header, lines[0]
        assert tuple(map(int, header.groups()[:3])) == (d, t, h)
        calls, events = int(header.group(4)), int(header.group(5))
        assert calls > events > 0   # the bare logger sees every call; events are the rows
        assert re.fullmatch(rf"  untraced forward\s+{NUMBER} ms", lines[1]), lines[1]
        rows = [OVERHEAD_LINE.match(line) for line in lines[2:6]]
        assert all(rows), lines[2:6]
        labels = [r.group(1).strip() for r in rows]
        assert labels == ["bare logger overhead", "capture floor overhead", "shapetrace `with` overhead",
                          "`with` + to_dict() overhead"]
        assert float(rows[0].group(4)) == 1.0   # the bare logger against itself
        assert [r.group(6) for r in rows] == [None, None, "3", "5"]
        for r in rows:
            ms, per_call = float(r.group(2)), float(r.group(3))
            assert per_call == pytest.approx(ms * 1e3 / calls, abs=5 / calls + 0.05)   # (printed rounded)
        assert re.fullmatch(rf"  to_dict\(\) by step, µs per event: events {NUMBER}, labels {NUMBER}, "
                            rf"sites\+args {NUMBER}, diagnostics {NUMBER}, json {NUMBER}", lines[6]), lines[6]
        assert re.fullmatch(rf"  traced with every fact / untraced: ratio {NUMBER}x  \(target <= 1\.3x at D 256\)",
                            lines[7]), lines[7]
