"""A table of the model's own cut to the batch's length (shapetrace/engine/rules/batch_tables.py): the PyTorch
tutorial's sequence-first ``PositionalEncoding`` fed batch-first input (songyangco/GETNext issue #2). On 96f365c
the traced forward was ``?`` with no finding (the cut ``pe[:x.size(0)]`` unnamed but for its B); the same cut
along the tokens (``pe[:x.size(1)]``) and a table the trace names stay silent."""

from __future__ import annotations

import pytest
import torch

import shapetrace

PE = torch.randn(50, 1, 32)   # (max_len, 1, D): rows are positions


def _traced(fn, dims="B=2 T=6 D=32 H=4"):
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        fn(x)
    return t


def test_a_position_table_cut_to_the_batch_is_a_warning():
    t = _traced(lambda x: x + PE[:x.size(0)])                                       # (B, 1, D)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("warning", "table-cut-to-batch", 0)]
    assert t.diagnostics[0].message == (
        "__getitem__ #0 cuts the table [50, 1, 32], which has no batch axis, to [B=2, 1, D=32]: axis 0 is cut to the "
        "batch's length (B), so batch entry b gets the table's entry b, and what each entry gets depends on its "
        "place in the batch.")
    assert t.report().verdict.mark == "!"


def test_at_one_sequence_the_cut_to_the_batch_is_one_row_for_every_token():
    """openai/whisper's decoder positions cut by ``x.shape[0]`` (tests/corpus/public5/whisper.py, positions-from-
    batch) at B = 1: one row, broadcast over every token. On bebe57e its ``?`` came only from the table's
    unnamed feature axis; once that axis is named by the input it is added to (infer/lined_up), the cut itself
    must say what it does."""
    x = torch.randn(1, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=1 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        x + PE[:x.size(0)]                                                          # (1, 1, D) -> (1, T, D)
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("warning", "table-cut-to-batch")]
    assert t.diagnostics[0].message == (
        "__getitem__ #0 cuts the table [50, 1, 32], which has no batch axis, to [B=1, 1, D=32]: axis 0 is cut to the "
        "batch's length (B), one entry: it broadcasts, so every token gets the table's first entry.")
    assert t.report().verdict.mark == "!"


@pytest.mark.parametrize("cut", [lambda x: x + PE[:x.size(1)].transpose(0, 1),   # (1, T, D): the tokens
                                 lambda x: x + PE[:6].transpose(0, 1)])            # a literal length
def test_a_position_table_cut_to_the_tokens_is_silent(cut):
    t = _traced(cut)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_a_named_table_cut_to_the_batch_is_silent():
    """A cache laid out per batch slot, named so (llama's ``cache_k[:bsz]``): its batch axis is its own."""
    cache = torch.randn(8, 6, 32)
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(cache, "_ T D")
        x + cache[:x.size(0)]
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []


def test_a_table_indexed_by_a_tensor_of_slots_is_silent_and_its_first_rows_are_not():
    """NVIDIA/TensorRT-LLM PR #2682 (tests/corpus/reports24/trtllm_continuous_cache_slot.py): a pool of cache slots
    read at the requests' ``slot_ids`` gives each entry the slot its index names, not the entry at its place: no
    warning (on 5b921bb it was a ``table-cut-to-batch`` warning, ``!`` on correct code); the pool cut to its first B
    slots (the bug) keeps its one warning."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.reports24 import trtllm_continuous_cache_slot as m

    found = {bug: [(d.kind, d.severity) for d in traced_build(m, bug, m.DIMS[0]).diagnostics if d.severity != "note"]
             for bug in ("", "first-slots")}
    assert found == {"": [], "first-slots": [("table-cut-to-batch", "warning")]}
