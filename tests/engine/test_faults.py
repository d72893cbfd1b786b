"""A fault of shapetrace's own inference or of one of its checks, met on code nobody here wrote, leaves
that op unnamed (or that check unsaid) and says so in a note; every other op is still named and checked.
With SHAPETRACE_STRICT=1 (``--traceback``; the test suite's SHAPETRACE_TEST=1 counts the same) it raises.

The faults are planted: an inference step and a rule that raise, as the cat onto an empty 1-d tensor
(transformers' DynamicCache) once made the join step raise IndexError and crash every read of the trace.
"""

from __future__ import annotations

import pytest
import torch

import shapetrace
from shapetrace.engine.infer import record as record_pass
from shapetrace.engine.rules import diagnose as diagnose_module


def heads_then_join(x):
    B, T, D = x.shape
    q = x.view(B, T, 4, D // 4).transpose(1, 2)                 # (B, H, T, d_k)
    both = torch.cat([q, q], dim=-2)                            # (B, H, 2·T, d_k): the planted fault
    return both.transpose(1, 2)                                  # (B, 2·T, H, d_k)


@pytest.fixture
def lenient(monkeypatch):
    """Faults become notes, as for a user (the suite's SHAPETRACE_TEST=1 makes them raise)."""
    monkeypatch.delenv("SHAPETRACE_TEST", raising=False)
    monkeypatch.delenv("SHAPETRACE_STRICT", raising=False)


def broken_join(*args, **kwargs):
    raise IndexError("tuple index out of range")


def traced():
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        heads_then_join(x)
    return t


def test_an_op_whose_inference_fails_is_unnamed_and_said(lenient, monkeypatch):
    monkeypatch.setattr(record_pass, "joined_with_parameters", broken_join)
    t = traced()
    assert [e.op for e in t.events] == ["view", "transpose", "cat", "transpose"]
    assert [e.output.dims for e in t.events] == [("B", "T", "H", "d_k"), ("B", "H", "T", "d_k"),
                                                 (None, None, None, None), (None, None, None, None)]
    (note,) = [d for d in t.diagnostics if d.kind == "inference-failed"]
    assert (note.severity, note.event) == ("note", 2)
    assert note.message == ("shapetrace could not work out the names of cat #2 (IndexError: tuple index out of "
                            "range); its results are left unnamed, so nothing that depends on them was checked. "
                            "This is a fault of shapetrace, not of your code.")
    assert [d.severity for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_a_fault_raises_with_strict(lenient, monkeypatch):
    monkeypatch.setattr(record_pass, "joined_with_parameters", broken_join)
    monkeypatch.setenv("SHAPETRACE_STRICT", "1")
    t = traced()
    with pytest.raises(IndexError, match="tuple index out of range"):
        _ = t.events


def test_a_rule_that_fails_is_said_and_the_others_still_speak(lenient, monkeypatch):
    def broken_rule(analysis):
        raise KeyError("axis")

    monkeypatch.setattr(diagnose_module, "RULES", [broken_rule, *diagnose_module.RULES])
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        x.view(2, 4, 6, 8)                                       # (B, H, T, d_k) without the transpose
    kinds = [d.kind for d in t.diagnostics]
    assert "mixed-axis" in kinds
    (note,) = [d for d in t.diagnostics if d.kind == "check-failed"]
    assert (note.severity, note.event) == ("note", None)
    assert note.message == ("one of shapetrace's checks (broken_rule) failed on this trace (KeyError: 'axis'), so "
                            "what it looks for was not checked. This is a fault of shapetrace, not of your code.")


def test_the_suite_runs_strict():
    """Our own tests never hide a fault of the engine behind a note."""
    import os

    assert os.environ.get("SHAPETRACE_TEST") == "1"
