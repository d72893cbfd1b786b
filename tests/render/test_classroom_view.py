"""Readable at a distance: --compact, --explain brief|full, --long-names; engine modules stay Rich-free."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, model_line, render

BRIEF = [
    "D → D · new 24 KiB", "D → H×d_k · view", "swap H↔T · view · non-contiguous",
    "D → D · new 24 KiB", "D → H×d_k · view", "swap H↔T · view · non-contiguous",
    "D → D · new 24 KiB", "D → H×d_k · view", "swap H↔T · view · non-contiguous",
    "swap d_k↔T · view · non-contiguous", "sums d_k → [B, H, T, T] · new 2.2 KiB",
    "softmax over T · new 2.2 KiB", "sums T → [B, H, T, d_k] · new 24 KiB",
    "swap T↔H · view · non-contiguous", "re-lay out [B, T, H, d_k] · copy 24 KiB",
    "H×d_k → D · view", "D → D · new 24 KiB",
]


@pytest.fixture(scope="module")
def trace():
    """The reference run's report, with the header ``shapetrace run`` shows above its table."""
    from shapetrace.app.session import run_reference
    from shapetrace.attention.config import AttentionConfig

    return run_reference(AttentionConfig()).report()


def test_brief_annotations_for_the_reference_model(trace):
    from shapetrace.engine.sentences import annotate

    assert [annotate(e, "brief") for e in trace.events] == BRIEF
    for e in trace.events:  # the default stays the full sentence
        assert annotate(e) == annotate(e, "full") and len(annotate(e)) > len(annotate(e, "brief"))
    # every "non-contiguous" claim is torch's own flag
    assert [("non-contiguous" in b) for b in BRIEF] == [not e.output.contiguous for e in trace.events]


def test_long_name_map_spells_out_merged_and_mixed_axes():
    from shapetrace.app.classroom import long_name_map

    assert long_name_map(["B", "T", "D", "H", "d_k", "H*d_k", "!T*H", "qkv", None]) == {
        "B": "batch", "T": "seq_len", "D": "d_model", "H": "heads", "d_k": "d_head",
        "H*d_k": "heads*d_head", "!T*H": "!seq_len*heads", "qkv": "qkv"}


def test_compact_brief_long_names_table(trace):
    from shapetrace.app.classroom import ViewOptions
    from shapetrace.render.classroom import ClassroomView

    lines = render(ClassroomView(trace, ViewOptions(compact=True, explain="brief", long_names=True)),
                   width=70).splitlines()
    lines = [line.rstrip() for line in lines]
    head = lines.index("  # op          shape [names]                             memory")
    assert set(lines[head + 1]) == {"─"}
    assert lines[head + 2: head + 6] == [
        " in input       [batch=2, seq_len=6, d_model=512]         24 KiB",
        "  0 linear      [batch=2, seq_len=6, d_model=512]         new 24 KiB",
        f"    q = self.split_heads(self.w_q(x))  reference.py:{model_line('q = self.split_heads(self.w_q(x))')}",
        "    d_model → d_model · new 24 KiB"]   # --long-names spells the sentences too
    assert "  2 transpose   [batch=2, heads=8, seq_len=6, d_head=64]  view" in lines
    assert all("(3072" not in line for line in lines) and max(map(len, lines)) <= 70


def test_full_table_unchanged_by_default_options(trace):
    from shapetrace.render.classroom import ClassroomView
    from shapetrace.render.table import TraceView, trace_header

    assert render(ClassroomView(trace)) == render(TraceView(trace, header=trace_header(trace), fold=True))


def test_default_screen_folds_repeats_and_shows_the_input_and_every_matmul(trace):
    from shapetrace.app.classroom import ViewOptions
    from shapetrace.render.classroom import ClassroomView

    lines = render(ClassroomView(trace), width=100).splitlines()
    # 60, since issue 23 the line that says whose copies they are, since issue 35 the one that says which
    # ops the table leaves out (the scaling's div) and how to show them (its "--all shows them" wraps),
    # since issue 33 the verdict's third line (heads stay apart)
    assert len(lines) <= 64, len(lines)
    assert lines[6] == ("   in input        [B=2, T=6, D=512]               (3072, 512, 1)          "
                        "24 KiB        contiguous")
    assert "  4-5 view, transpose  k: the same two ops as q, #1-#2" in lines  # in the index column
    assert "  7-8 view, transpose  v: the same two ops as q, #1-#2" in lines
    assert "      q @ k_t: [B, H, T, d_k] @ [B, H, d_k, T] -> [B, H, T, T]" in lines
    assert "      weights @ v: [B, H, T, T] @ [B, H, T, d_k] -> [B, H, T, d_k]" in lines
    assert not any("✗" in line for line in lines)  # ✗ is for errors; a transpose is "strided"
    assert sum(line.endswith("  strided") for line in lines) == 3  # q's transpose, k_t, the merge transpose
    every = render(ClassroomView(trace, ViewOptions(fold=False)), width=100).splitlines()
    assert not any("the same two ops" in line for line in every) and len(every) > len(lines)


def test_cli_readability_options(cli):
    result = cli("run", "--compact", "--explain", "brief", "--long-names", "--width", "70")
    assert result.exit_code == 0
    assert "  9 transpose   [batch=2, heads=8, d_head=64, seq_len=6]  view" in result.output
    assert "swap d_head↔seq_len · view · non-contiguous" in result.output
    assert cli("run", "--width", "20").exit_code == 2


def test_engine_modules_do_not_import_rich_or_torch():
    code = ("import sys; import shapetrace.app.predict, shapetrace.app.classroom, shapetrace.cli.classroom; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'torch'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_json_refuses_classroom_modes(cli):
    result = cli("run", "--json", "--step")
    assert result.exit_code == 2
    assert "error: --json prints only the JSON trace: use it without --step, --predict or --export" in result.output


def test_compact_table_shows_every_matmul_with_both_operands(trace):
    from shapetrace.app.classroom import ViewOptions
    from shapetrace.render.classroom import ClassroomView

    lines = render(ClassroomView(trace, ViewOptions(compact=True)), width=70).splitlines()
    assert "    q @ k_t: [B, H, T, d_k] @ [B, H, d_k, T] -> [B, H, T, T]" in lines
    assert "    weights @ v: [B, H, T, T] @ [B, H, T, d_k] -> [B, H, T, d_k]" in lines
    assert not any(line.endswith(" q @") for line in lines)  # "q @ kᵀ" is never split by a wrap
