"""A lookup table's width named by what a later use proves (shapetrace/engine/infer/lookup_widths.py).

An ``nn.Embedding`` of relative distances or buckets (``[T, T] -> [T, T, w]``) makes a width of the module's own,
whose size (a head's ``d_k``, the heads' ``H``) decides nothing. On c32db91 it stayed unnamed, so every file with
one was ``? ... not checked (unnamed axes): #i embedding`` (BERT's relative keys, SpeechT5's relative positions,
T5's bucketed bias through einops, SeamlessM4T's distance embedding). A product that sums it against a head's
features, or an axis move whose pattern names it, proves it; the name is carried back to the lookup's output.
The first three tests fail on c32db91 (the embedding's dims there: ``('T', 'T', None)``); the last guards the rule."""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

import shapetrace

DIMS = "B=2 T=6 D=32 H=4"


def _qk():
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    return q, k


def _distances(q):
    t = q.shape[2]                                                               # (a size read from the tokens)
    return torch.arange(t).view(-1, 1) - torch.arange(t).view(1, -1) + t - 1     # (T, T)


def _traced(fn, *tensors, names=("B H T d_k", "B H T d_k")):
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        for x, n in zip(tensors, names):
            shapetrace.name(x, n)
        fn(*tensors)
    (lookup,) = [e for e in t.events if e.op == "embedding"]
    return t, lookup


def test_an_einsum_summing_the_width_against_the_queries_features_names_it_d_k():
    """BERT's ``relative_key`` (transformers' BertSelfAttention): ``einsum('bhld,lrd->bhlr', q, table)``."""
    table = nn.Embedding(11, 8)

    def fn(q, k):
        pos = table(_distances(q)).to(dtype=q.dtype)                              # (T, T, d_k)
        return (q @ k.transpose(-1, -2) + torch.einsum("bhld,lrd->bhlr", q, pos)).softmax(-1)

    t, lookup = _traced(fn, *_qk())
    assert lookup.outputs[0].dims == ("T", "T", "d_k")
    verdict = t.report().verdict                # (every op checked; the bias's values are another matter)
    assert (verdict.mark, verdict.checked, verdict.total, verdict.unchecked) == ("?", 8, 8, ())
    assert verdict.unproven == ("the values of a mask or bias on the scores were not read",)


def test_a_matrix_product_summing_the_width_names_it_d_k():
    """SpeechT5's relative positions: ``q [T, B·H, d_k] @ table.transpose(-2, -1) [T, d_k, T]``."""
    table = nn.Embedding(11, 8)

    def fn(q, k):
        pos = table(_distances(q))                                                # (T, T, d_k)
        scores = q @ k.transpose(-1, -2)                                         # (B, H, T, T)
        rel = torch.matmul(q.reshape(8, 6, 8).transpose(0, 1), pos.transpose(-2, -1))   # (T, B·H, T)
        return (scores + rel.transpose(0, 1).view(2, 4, 6, 6)).softmax(-1)

    t, lookup = _traced(fn, *_qk())
    assert lookup.outputs[0].dims == ("T", "T", "d_k")
    assert t.report().verdict.line.startswith("✓ checked all ")


def test_an_einops_pattern_moving_the_width_onto_the_heads_names_it_h():
    """T5's bucketed bias (x-transformers' RelativePositionBias): ``rearrange(values, 'i j h -> h i j')`` then
    added to the scores: the pattern names the heads, and the lookup's width is that axis."""
    table = nn.Embedding(11, 4)

    def fn(q, k):
        bias = rearrange(table(_distances(q)), "i j h -> h i j")                 # (H, T, T)
        return (q @ k.transpose(-1, -2) + bias).softmax(-1)

    t, lookup = _traced(fn, *_qk())
    assert lookup.outputs[0].dims == ("T", "T", "H")
    assert t.report().verdict.line.startswith("✓ checked all ")


def test_a_width_summed_against_an_unnamed_axis_stays_unnamed():
    """The same product against features no name covers proves nothing: the size (a head's) never decides."""
    table = nn.Embedding(11, 8)

    def fn(q, k):
        pos = table(_distances(q))
        return torch.einsum("bhld,lrd->bhlr", q, pos)

    t, lookup = _traced(fn, *_qk(), names=("B H T _", "B H T d_k"))
    assert lookup.outputs[0].dims == ("T", "T", None)
    assert t.report().verdict.mark == "?"
