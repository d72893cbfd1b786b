"""benchmarks/bench_dependencies.py prints the dependency check's time against one untraced forward,
measured in the same run. Its structure and what held are checked, never its numbers (shared cores)."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, script_forked


def test_the_benchmark_prints_both_medians_and_their_ratio():
    done = script_forked(ROOT / "benchmarks" / "bench_dependencies.py", "--repeat", "3",
                         "--d-model", "64", "--heads", "4", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = ("untraced forward", "one forward, a token moved", "token contracts", "every contract",
            "every contract, planned too", "every contract, the full way")
    assert len(lines) == len(rows) + 1
    assert lines[0].split() == ["untraced", "forward", lines[0].split()[2], "ms", "1.00x"]
    for row, line in zip(rows, lines):
        assert re.fullmatch(re.escape(row) + r" +\d+\.\d{3} ms +\d+\.\d{2}x", line), line
    # the reference model is correct: the contracts it can be held to hold (it declares no causal mask)
    assert re.fullmatch(r"\(medians of 3, thread CPU time; held: batch entries stay apart, each token depends on "
                        r"itself, heads stay apart; load average \d+\.\d, 1 threads\)", lines[-1])


@pytest.mark.parametrize("style", ["nanogpt", "llama", "llama-gqa"])
def test_the_styles_whose_splits_read_the_batch_elsewhere_hold_every_contract(style):
    """nanoGPT's and Llama's attentions (``--style``), each with a causal mask, Llama's with grouped-query
    heads too: every contract holds."""
    done = script_forked(ROOT / "benchmarks" / "bench_dependencies.py", "--repeat", "3",
                         "--d-model", "64", "--heads", "4", "--style", style, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"\({style}; medians of 3, thread CPU time; held: batch entries stay apart, each token "
                        r"depends on itself, the causal mask holds, heads stay apart; load average \d+\.\d, 1 "
                        r"threads\)", done.stdout.splitlines()[-1])


def test_the_parts_say_what_each_part_of_the_check_costs():
    done = script_forked(ROOT / "benchmarks" / "bench_dependencies.py", "--repeat", "3",
                         "--d-model", "64", "--heads", "4", "--parts", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = ("forward", "one row per head added in the core", "the copies made, nothing compared", "isolation alone",
            "planning (head_hooks.points)", "token contracts", "every contract")
    assert len(lines) == len(rows) + 1
    for row, line in zip(rows, lines):
        assert re.fullmatch(re.escape(row) + r" +\d+\.\d{3} ms +\d+\.\d{2}x", line), line
    assert re.fullmatch(r"\(medians of 3, thread CPU time; load average \d+\.\d\)", lines[-1])
