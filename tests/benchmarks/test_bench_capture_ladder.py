"""benchmarks/bench_capture_ladder.py prints, per model size, each step of the capture ladder with its cost
per call, its ratio to the bare logger's overhead and the traced / untraced ratio, then the plain pass and
the sum the issue's targets are read against. The structure is checked, never the numbers (timings on
shared cores); tiny settings (2 layers, 2 rounds) keep it to a few seconds."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

NUMBER = r"(-?\d+\.\d+)"
STEP = re.compile(rf"^  (\S+(?: \S+)?)\s+{NUMBER} µs/call  ratio\s+{NUMBER}x bare  traced / untraced\s+{NUMBER}x$")
HEADER = re.compile(r"^2 layers, D (\d+), T (\d+), H (\d+): medians of 2 interleaved rounds, 1 thread, thread CPU "
                    rf"time; (\d+) calls; untraced forward {NUMBER} ms$")


@pytest.fixture(scope="module")
def output() -> str:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_capture_ladder.py"), "--rounds", "2",
                           "--layers", "2", "--sizes", "16x4x2,32x8x4"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.benchmark
def test_one_block_per_size_with_every_step_in_order(output):
    blocks = output.strip().split("\n\n")
    assert len(blocks) == 2
    for block, size in zip(blocks, ((16, 4, 2), (32, 8, 4))):
        lines = block.splitlines()
        assert len(lines) == 9, block
        header = HEADER.match(lines[0])
        assert header and tuple(map(int, header.groups()[:3])) == size, lines[0]
        steps = [STEP.match(line) for line in lines[1:7]]
        assert all(steps), lines[1:7]
        assert [s.group(1) for s in steps] == ["bare", "floor", "+user stack", "+identity", "+module path",
                                               "shapetrace"]
        assert float(steps[0].group(3)) == 1.0   # the bare logger against itself
        assert re.fullmatch(rf"  plain pass\s+{NUMBER} µs/call  ratio\s+{NUMBER}x bare  \(one dict per call, "
                            r"nothing named\)", lines[7]), lines[7]
        assert re.fullmatch(rf"  least capture \+ plain pass: ratio {NUMBER}x bare \(target for every fact <= 5x\), "
                            rf"traced / untraced {NUMBER}x \(target <= 1\.3x at D 256\)", lines[8]), lines[8]


def test_the_plain_pass_reads_every_row_it_is_given():
    """The pass the ladder times makes one dict per recorded call, with the layouts the recorder saw."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    from bench_capture_ladder import plain_rows, recorders

    _, identity = recorders()
    x = torch.randn(2, 6, 8)                                     # (B, T, D)
    with identity() as mode:
        x.view(2, 6, 2, 4).transpose(1, 2)                        # (B, H, T, d_k)
    rows = plain_rows(mode.rows)
    assert [r["op"] for r in rows] == ["view", "transpose"]
    assert rows[0]["inputs"] == [{"shape": [2, 6, 8], "stride": [48, 8, 1]}]
    assert rows[0]["output"] == {"shape": [2, 6, 2, 4], "stride": [48, 8, 4, 1]}
    assert rows[1]["output"] == {"shape": [2, 2, 6, 4], "stride": [48, 4, 8, 1]}
    assert rows[1]["source"] == f"test_bench_capture_ladder.py:{_line_of('x.view(2, 6, 2, 4)')}"


def _line_of(text: str) -> int:
    lines = (ROOT / "tests" / "benchmarks" / "test_bench_capture_ladder.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line and "_line_of" not in line)
