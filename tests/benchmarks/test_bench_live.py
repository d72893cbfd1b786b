"""benchmarks/bench_live.py, small: 40 simulated students over WebSockets against a real ``shapetrace live``
process, every answer of a question sent at once. What is checked is that no answer is lost (each histogram
equals the answers acknowledged, the CSV holds every answer after Ctrl-C) and the report's structure,
never the timings (shared cores)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

pytest.importorskip("websockets", reason="the live extra is not installed: pip install -e '.[live]'")

MS = r"(\d+\.\d) ms"


@pytest.mark.benchmark
def test_forty_students_at_once_lose_no_answer():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_live.py"), "--students", "40",
                           "--questions", "2"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"live class: 40 students, 2 questions, every answer of a question sent at once; "
                        r"server: shapetrace live \(pid \d+\)", lines[0])
    for n, line in enumerate(lines[1:3], 1):
        assert re.fullmatch(rf"question {n}: 40/40 answers counted, histogram equals the answers sent; last answer "
                            rf"-> projector count -?{MS}, last answer -> histogram {MS} \(reveal -> histogram {MS}\)",
                            line), line
    assert re.fullmatch(r"server memory: \d+\.\d MiB with 40 students joined, \d+\.\d MiB after 80 answers "
                        r"\(peak \d+\.\d MiB\): [+-]\d+\.\d\d KiB per answer", lines[3]), lines[3]
    assert lines[4] == "csv: 80 rows for 80 answers; server exit 0 after Ctrl-C"
