"""engine/indices.py: what index values count, and picks along another axis with them.

Each case is a few lines of the public patterns the module follows (MAE's ``argsort`` twice,
``torch.gather`` and ``take_along_dim`` with indices repeated over the features, ``index_select`` with
positions read from a size); the counted axis and the picked axis are named by ``shapetrace.name`` or
read from sizes, never decided by a size.
"""

from __future__ import annotations

import pytest
import torch

import shapetrace

SIZES = [(2, 5, 3), (4, 4, 4)]   # (B, N, C): distinct, and B = N = C = 4


def _picks(fn, B, N, C):
    x = torch.randn(B, N, C)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} N={N} D={C}") as t:
        shapetrace.name(x, "B N D")
        fn(x)
    return [(d.kind, t.events[d.event].op) for d in t.diagnostics if d.kind == "index-wrong-axis"], t


def _sorted_tokens(x, dim):
    """MAE's ``random_masking``: ``ids_shuffle = torch.argsort(noise, dim=1)``,
    ``ids_restore = torch.argsort(ids_shuffle, dim=1)``, a gather with the restore order repeated over the
    features."""
    B, N, C = x.shape
    noise = torch.rand(B, N)                                            # (B, N)
    ids_restore = torch.argsort(torch.argsort(noise, dim=1), dim=1)     # (B, N): counts N
    return torch.gather(x, dim, ids_restore.unsqueeze(-1).repeat(1, 1, C))  # (B, N, C)


@pytest.mark.parametrize(("B", "N", "C"), SIZES)
def test_argsort_indices_count_the_axis_they_sorted(B, N, C):
    assert _picks(lambda x: _sorted_tokens(x, 1), B, N, C)[0] == []
    if C >= N:   # (along the features the indices must fit in them)
        assert _picks(lambda x: _sorted_tokens(x, 2), B, N, C)[0] == [("index-wrong-axis", "gather")]


@pytest.mark.parametrize(("B", "N", "C"), SIZES)
def test_take_along_dim_is_a_pick_like_gather(B, N, C):
    def pick(x, dim):
        order = x.mean(-1).argsort(dim=-1)                              # (B, N): counts N
        return torch.take_along_dim(x, order[..., None].expand(-1, -1, x.shape[-1]), dim=dim)

    assert _picks(lambda x: pick(x, 1), B, N, C)[0] == []
    if C >= N:
        assert _picks(lambda x: pick(x, 2), B, N, C)[0] == [("index-wrong-axis", "take_along_dim")]


@pytest.mark.parametrize(("B", "N", "C"), SIZES)
def test_arange_from_a_size_counts_that_axis_and_an_offset_keeps_it(B, N, C):
    """``torch.arange(x.size(0))`` counts the batch: picking tokens with it is the slip; ``n + arange``
    (a position offset) still counts what arange counts."""
    def pick(x, dim):
        positions = 0 + torch.arange(x.size(0))                         # (B,): counts B
        return x.index_select(dim, positions)

    assert _picks(lambda x: pick(x, 0), B, N, C)[0] == []
    if B <= N:
        assert _picks(lambda x: pick(x, 1), B, N, C)[0] == [("index-wrong-axis", "index_select")]


def test_indices_that_count_an_unnamed_axis_or_a_flat_index_claim_nothing():
    """argmax without ``dim`` is a flat index; a sort over an axis with no name counts nothing known."""
    def pick(x):
        flat = x.argmax().reshape(1)                                    # a flat index: no one axis
        unnamed = torch.rand(3, 4).argsort(dim=0)[:, :1].reshape(-1)    # counts an unnamed axis
        return x.index_select(2, flat % 3), x.index_select(2, unnamed)

    found, t = _picks(pick, 2, 5, 3)
    assert found == [] and [d.kind for d in t.diagnostics if d.severity == "error"] == []


def test_the_message_names_both_axes_and_the_fix():
    found, t = _picks(lambda x: _sorted_tokens(x, 2), 2, 5, 8)
    [d] = [d for d in t.diagnostics if d.kind == "index-wrong-axis"]
    e = t.events[d.event]
    assert d.message == (
        f"gather #{e.index} picks along axis 2 (D, features) of [B=2, N=5, D=8] with indices that count N "
        "(tokens): argsort made them along N. Its tokens axis is axis 1 (N), so the pick reorders other values "
        "by positions of N.")
    assert d.fix == "Pick along the axis the indices count: dim=1 (e.g. torch.gather(x, dim=1, index=...))."
