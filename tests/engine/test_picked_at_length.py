"""A table's one entry picked at a tensor's length and added to every token of it (shapetrace/engine/lookups.py
``picked_at_length``, rules/batch_tables.py): DiffPoseTalk issue #20, ``x + self.pe[:, x.shape[1], :]`` where
``self.pe[:, :x.shape[1], :]`` was meant (tests/corpus/reports38/diffposetalk_pe_index.py). The pick's integer is a
length read from ``x`` (:class:`shapetrace.engine.sizes.SizeOf`: its node and axis), and the entry is added to that
same ``x``, broadcast over its tokens. On dd82346 the bug was ``?`` only for an unrelated mask, and ``✓`` without
it (the class below)."""

from __future__ import annotations

import math

import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build
from tests.corpus.reports38 import diffposetalk_pe_index


class _Sinusoidal(nn.Module):
    """The PyTorch tutorial's ``PositionalEncoding`` (batch-first), before a linear layer: ``at_length`` picks the
    entry at ``x.shape[1]``; ``step`` adds the entry at the cache's length to one new token (a decoding step)."""

    def __init__(self, d: int = 32, max_len: int = 64, at_length: bool = False):
        super().__init__()
        self.at_length = at_length
        position = torch.arange(max_len).unsqueeze(1)                               # (max_len, 1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(1, max_len, d)
        pe[0, :, 0::2], pe[0, :, 1::2] = torch.sin(position * div), torch.cos(position * div)
        self.register_buffer("pe", pe)
        self.proj = nn.Linear(d, d)

    def forward(self, x, cache=None):                                               # (B, T, D)
        if cache is not None:   # (a step: the new token's position is the cache's length)
            x = x + self.pe[:, cache.shape[1], :]                                  # (B, 1, D)
        elif self.at_length:
            x = x + self.pe[:, x.shape[1], :]                                      # (B, T, D): one entry for all
        else:
            x = x + self.pe[:, :x.shape[1], :]                                     # (B, T, D)
        return self.proj(x)


def _kinds(model, *inputs, dims="B=2 T=6 D=32"):
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(*inputs)
    return t, [d.kind for d in t.diagnostics]


def test_an_entry_picked_at_the_tokens_length_and_added_to_them_is_a_warning():
    t, kinds = _kinds(_Sinusoidal(at_length=True).eval(), torch.randn(2, 6, 32))
    assert kinds == ["picked-at-length"]
    found = t.diagnostics[0]
    assert found.severity == "warning" and found.event == 0
    assert found.message == (
        "__getitem__ #0 picks one entry of the table [1, 64, 32] at 6, a length read from the tensor that an `add` "
        "adds it to: the entry [1, D=32] broadcasts over that tensor's 6 tokens, so every token gets the entry at "
        "position 6, one past the last, and none its own position.")
    assert t.report().verdict.line.startswith("! no errors, 1 warning")


def test_the_table_cut_to_the_length_is_no_finding():
    _, kinds = _kinds(_Sinusoidal().eval(), torch.randn(2, 6, 32))
    assert kinds == []


def test_a_step_picking_the_entry_at_the_caches_length_is_no_finding():
    _, kinds = _kinds(_Sinusoidal().eval(), torch.randn(2, 1, 32), torch.randn(2, 5, 32), dims="B=2 T=1 S=5 D=32")
    assert "picked-at-length" not in kinds


def test_the_report_file_warns_on_the_bug_alone():
    dims = diffposetalk_pe_index.DIMS[0]
    bug = traced_build(diffposetalk_pe_index, "pe-index", dims, dependencies=True)
    assert [d.kind for d in bug.diagnostics if d.severity != "note"] == ["picked-at-length"]
    # the "!" line says what was not proven too (the audio alignment mask), as the "?" line of the correct file does
    assert "; not proven: #39 masked_fill's mask hides keys in a pattern" in bug.report().verdict.line
    correct = traced_build(diffposetalk_pe_index, "", dims, dependencies=True)
    assert "picked-at-length" not in [d.kind for d in correct.diagnostics]
