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


def _heavy_hitters(x, offset: bool, keep: int = 2):
    """SCOPE's decoding compression (Linking-ai/SCOPE issue #6): the first 2 tokens kept, the top ``keep`` of
    the middle chosen by ``topk`` over ``scores[:, 2:-1]`` (positions of that slice), gathered with the kept
    ones from ``x[:, :-1]``; ``offset``: the slice's start added back (``+ 2``), as the fix does."""
    B, N, C = x.shape
    scores = x.pow(2).sum(-1)                                           # (B, N): one score per token
    chosen = scores[:, 2:-1].topk(keep, dim=-1).indices                 # (B, keep): counts N[2:N-1]
    if offset:
        chosen = chosen + 2                                             # counts N
    first = torch.arange(2).expand(B, 2)                                # (B, 2): a plain range, counts nothing named
    index = torch.cat([first, chosen], dim=1)                           # (B, 2 + keep)
    return torch.gather(x[:, :-1], 1, index.unsqueeze(-1).expand(-1, -1, C))


def test_topk_indices_over_a_slice_count_from_its_start_until_it_is_added():
    """``topk``'s indices count the slice they ran over (``N[2:6]``), pass through a ``cat`` with a plain range,
    and picking ``N[0:6]`` with them is picking other tokens; ``+ 2`` makes them count ``N``. On eea3781 topk's
    indices counted nothing and no pick was judged (reports11/scope_topk_offset: ``?``)."""
    found, t = _picks(lambda x: _heavy_hitters(x, offset=False), 2, 7, 3)
    assert found == [("index-wrong-axis", "gather")]
    assert [d.message for d in t.diagnostics if d.kind == "index-wrong-axis"] == [
        "gather #7 picks along axis 1 (N[0:6]) of [B=2, N[0:6]=6, D=3] with indices that count N[2:6]: topk made "
        "them along N[2:6], positions counted from that range's start, and N[0:6] starts elsewhere on the same "
        "axis, so each index picks another token than the one chosen."]
    assert _picks(lambda x: _heavy_hitters(x, offset=True), 2, 7, 3)[0] == []


def test_an_offset_that_is_not_the_slices_start_keeps_the_count():
    """Only the slice's own start rebases the indices (``+ 1`` on positions of ``N[2:6]`` still counts from
    elsewhere), and a ``topk``'s values count nothing."""
    def pick(x):
        chosen = x.pow(2).sum(-1)[:, 2:-1].topk(2, dim=-1)
        return torch.gather(x[:, :-1], 1, (chosen.indices + 1).unsqueeze(-1).expand(-1, -1, x.shape[-1])), \
            x.index_select(1, chosen.values[0].long().clamp(0, 1))

    assert _picks(pick, 2, 7, 3)[0] == [("index-wrong-axis", "gather")]
