"""Masks that enter the traced code in the shapes public code hands them in (tests/corpus/public9/bart.py,
after transformers' BART, and a script building its causal triangle from literal sizes) are named as masks:

* a square of literal sizes (a causal triangle, a bias table, an index) is named by no size alone, but at
  B = T, where it also fits ``[B, T]`` and ``[T, B]``, ``[T, T]`` is one more reading a finding must hold
  under: a correct script building BART's mask at B = T = H = 4 got a false ``broadcast-mismatch`` (its
  triangle read ``[B, T]``);
* transformers' 4-D masks ``[B, 1, T, T]`` and ``[B, 1, 1, T]`` read with their size-1 axes unnamed: a
  correct BART was ``?`` (its mask unnamed), and the scores viewed ``(H, bsz, tgt, src)`` to add it were
  ``?`` at every size, now ``broadcast-mismatch`` where the batch has more than one entry.
"""

from __future__ import annotations

import sys

import pytest
import torch

import shapetrace
from tests.corpus.helpers import round_outcome, traced_build
from tests.corpus.public9 import bart

SIZES = ("B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4", "B=1 T=6 D=32 H=4")


def test_bart_is_checked_whole_where_sizes_tell_names_apart():
    assert [round_outcome(bart, "", d) for d in SIZES] == [("✓", ()), ("?", ()), ("✓", ())]
    mask = next(e for e in traced_build(bart, "", SIZES[0]).events if e.op == "add").inputs[1]
    assert (mask.shape, mask.dims) == ((2, 1, 6, 6), ("B", None, "T", "T"))


def test_bart_bugs_are_errors_at_every_size_that_shows_them():
    assert [round_outcome(bart, "out-no-transpose", d) for d in SIZES] == [
        ("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)), ("✗", ("mixed-axis",))]
    assert [round_outcome(bart, "mask-view-heads-first", d) for d in SIZES[:2]] == [("✗", ("broadcast-mismatch",))] * 2


def test_bart_scores_viewed_heads_first_at_a_batch_of_one_earn_no_check_mark():
    # at B = 1 the scores viewed (H, 1, T, S) hold what (1, H, T, S) holds: the run cannot show the bug, and the
    # note says so (tests/corpus/test_unexercised_batch.py), there and where the heads-first scores' product is
    # unfolded batch-first (#23)
    t = traced_build(bart, "mask-view-heads-first", SIZES[2])
    assert round_outcome(bart, "mask-view-heads-first", SIZES[2]) == ("?", ())
    notes = [(d.kind, d.event) for d in t.diagnostics if d.severity == "note"]
    assert notes == [("batch-unexercised", 17), ("batch-unexercised", 23)]
    assert next(d for d in t.diagnostics if d.kind == "batch-unexercised").message.startswith(
        "view #17 is given a size read from B, which has one entry here, and places it on the other side of H "
        "than memory holds it")


def _causal_script(B: int, T: int, D: int = 32, H: int = 4) -> shapetrace.Trace:
    """A script's own forward with its mask made inside the trace from literal sizes, as a script's
    ``__main__`` makes it for BART (a causal triangle, nanoGPT's ``torch.tril(torch.ones(block_size,
    block_size))`` at the run's length, plus a key-padding part)."""
    torch.manual_seed(0)
    x, proj = torch.randn(B, T, D), torch.nn.Linear(D, 3 * D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        q, k, v = proj(x).split(D, dim=2)  # (B, T, D) x3
        q, k, v = (z.view(B, T, H, D // H).transpose(1, 2) for z in (q, k, v))  # (B, H, T, d_k)
        causal = torch.full((T, T), float("-inf")).triu(1)  # (T, T)
        keep = torch.ones(B, T)  # (B, T)
        keep[0, T - 2:] = 0
        mask = causal[None, None] + (1.0 - keep)[:, None, None, :] * torch.finfo(torch.float32).min  # (B, 1, T, T)
        att = (q @ k.transpose(-2, -1)) / (D // H) ** 0.5 + mask  # (B, H, T, T)
        (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D)  # (B, T, D)
    return t


@pytest.mark.parametrize("sizes", [(2, 6), (4, 4), (1, 6)])
def test_a_causal_triangle_of_literal_sizes_is_never_read_as_batch_and_tokens(sizes):
    # Literal sizes name nothing: the triangle stays unnamed (its ops unchecked, `?`); at B = T = 4 it fits
    # [B, T], [T, B] and [T, T], and no finding rests on one of them (it was a false broadcast-mismatch).
    t = _causal_script(*sizes)
    triangle = next(e for e in t.events if e.op == "triu").output
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.report().verdict.line.startswith("?")
    if sizes != (4, 4):
        assert triangle.dims == (None, None)
        assert "not checked (unnamed axes): #8 triu, #10 __getitem__" in t.report().verdict.line


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
