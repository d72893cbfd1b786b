"""Each class of silent attention bug is caught, with its exact kind and severity, at several sizes,
equal sizes included (T == H, T == d_k, B == H, S == T), and its fix traces clean.

Inputs are named only by ``dims``: every tensor entering the traced code whose shape matches them.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from tests.corpus.bug_models import (
    ERROR,
    WARNING,
    additive_mask,
    batch_as_seq,
    caught,
    cross_attention_right,
    einops_tokens_into_heads,
    found,
    fuxictr_heads_as_tokens,
    key_query_swapped,
    key_query_swapped_same_length,
    loud,
    masked_fill_key_axis,
    masked_fill_query_axis,
    merge_without_transpose,
    reshape_not_transpose,
    scaled,
    scaled_by_power,
    sizes,
    skip_transpose,
    softmax_dim_minus_2,
    softmax_over_features,
    tiled_mask,
    trace,
    trace_cross,
    view_without_transpose,
    wrong_transpose,
)
from tests.styles import contradictions, load


@pytest.mark.parametrize("B,T,D,H", sizes((2, 6, 64, 8), (3, 12, 48, 4), (2, 10, 20, 2)))
def test_view_without_transpose_is_mixed_axis(B, T, D, H):
    t, _ = trace(view_without_transpose, B, T, D, H)
    assert (ERROR, "mixed-axis") in found(t)


@pytest.mark.parametrize("B,T,D,H", sizes((2, 8, 64, 8), (2, 4, 16, 4), (3, 6, 12, 6)))
def test_view_without_transpose_at_T_equals_H_attends_over_the_wrong_axis(B, T, D, H):
    """At T == H the shapes are right; memory holds [B, T, H, d_k], so T is a batch axis and each
    query attends over heads (the established kind for a plain token axis used as batch)."""
    t, _ = trace(view_without_transpose, B, T, D, H)
    assert (ERROR, "attends-over-wrong-axis") in found(t)


@pytest.mark.parametrize("B,T,D,H", sizes((2, 8, 64, 8), (2, 4, 16, 4), (2, 6, 32, 4), (4, 3, 12, 4)))
def test_fuxictr_view_B_times_T_attends_over_heads(B, T, D, H):
    t, _ = trace(fuxictr_heads_as_tokens, B, T, D, H)
    assert (ERROR, "attends-over-heads") in found(t)


MASK_VALUES = [pytest.param(-1e9, id="-1e9"), pytest.param(-10000.0, id="-10000"),
               pytest.param(torch.finfo(torch.float32).min, id="finfo.min"), pytest.param(float("-inf"), id="-inf")]
QUERY_MASK_VALUES = MASK_VALUES   # every hiding fill is caught: -inf, -1e9, -10000 and finfo.min
MASK_SIZES = sizes((2, 6, 64, 8), (2, 4, 16, 4), (4, 8, 64, 8), (2, 5, 10, 2))


@pytest.mark.parametrize("value", QUERY_MASK_VALUES)
@pytest.mark.parametrize("B,T,D,H", MASK_SIZES)
def test_padding_mask_on_the_query_axis(value, B, T, D, H):
    t, _ = trace(masked_fill_query_axis(value), B, T, D, H)
    assert (ERROR, "mask-wrong-axis") in found(t)


@pytest.mark.parametrize("value", MASK_VALUES)
@pytest.mark.parametrize("B,T,D,H", MASK_SIZES)
def test_padding_mask_on_the_key_axis_is_clean(value, B, T, D, H):
    t, dims = trace(masked_fill_key_axis(value), B, T, D, H)
    assert loud(t) == []
    assert contradictions(t, dims) == []


@pytest.mark.parametrize("big", [-1e9, -10000.0])
@pytest.mark.parametrize("B,T,D,H", MASK_SIZES)
def test_additive_mask_on_the_query_axis(big, B, T, D, H):
    t, _ = trace(additive_mask(on_keys=False, big=big), B, T, D, H)
    assert (ERROR, "mask-wrong-axis") in found(t)


@pytest.mark.parametrize("big", [-1e9, -10000.0])
@pytest.mark.parametrize("B,T,D,H", MASK_SIZES)
def test_additive_mask_on_the_key_axis_is_clean(big, B, T, D, H):
    t, _ = trace(additive_mask(on_keys=True, big=big), B, T, D, H)
    assert loud(t) == []


TILE_SIZES = sizes((2, 6, 64, 8), (4, 6, 16, 4), (3, 3, 6, 3), (2, 2, 4, 2))


@pytest.mark.parametrize("B,T,D,H", TILE_SIZES)
def test_mask_tiled_heads_major_against_batch_major_scores(B, T, D, H):
    t, _ = trace(tiled_mask(interleave=False), B, T, D, H)
    assert (ERROR, "mask-wrong-batch-order") in found(t)


@pytest.mark.parametrize("B,T,D,H", TILE_SIZES)
def test_mask_repeat_interleaved_batch_major_is_clean(B, T, D, H):
    t, _ = trace(tiled_mask(interleave=True), B, T, D, H)
    assert loud(t) == []


CROSS_SIZES = [pytest.param(2, 6, 10, 32, 4, id="T6-S10"), pytest.param(2, 4, 8, 16, 4, id="T4-S8-T==H==d_k"),
               pytest.param(2, 8, 4, 32, 4, id="T8-S4-S==H")]
SAME_LENGTH = [pytest.param(2, 6, 6, 32, 4, id="S==T"), pytest.param(2, 4, 4, 16, 4, id="S==T==H==d_k"),
               pytest.param(3, 3, 3, 9, 3, id="B==S==T==H")]


@pytest.mark.parametrize("B,T,S,D,H", CROSS_SIZES)
def test_key_times_query_transposed(B, T, S, D, H):
    t, _ = trace_cross(key_query_swapped, B, T, S, D, H)
    assert (ERROR, "query-key-swapped") in found(t)


@pytest.mark.parametrize("B,T,S,D,H", SAME_LENGTH)
def test_key_times_query_transposed_when_lengths_are_equal(B, T, S, D, H):
    # S == T named from --dims alone: which sequence is T (the queries) was a guess, so no finding rests on
    # it; the bug is still an error, from where the elements came from: the weights' columns are x's tokens
    # (the queries') and v's rows are the context's, and the product contracts the two
    t, _ = trace_cross(key_query_swapped_same_length, B, T, S, D, H)
    assert (ERROR, "contracts-different-axes") in found(t)
    assert (ERROR, "query-key-swapped") not in found(t)


@pytest.mark.parametrize("B,T,S,D,H", CROSS_SIZES + SAME_LENGTH)
def test_cross_attention_the_right_way_round_is_clean(B, T, S, D, H):
    t, dims = trace_cross(cross_attention_right, B, T, S, D, H)
    assert loud(t) == []
    assert contradictions(t, dims) == []


SEQ_FIRST_SIZES = sizes((2, 6, 32, 4), (4, 4, 16, 4), (3, 8, 64, 8), (2, 3, 12, 2))


@pytest.mark.parametrize("B,T,D,H", SEQ_FIRST_SIZES)
def test_seq_first_code_fed_batch_first(B, T, D, H):
    """fairseq-style code reads [B, T, D] as [T, B, D]: every query attends over the batch."""
    style = load("seq_first")
    model, _ = style.build({"B": B, "T": T, "D": D, "H": H})
    t, _ = trace(lambda x, H: model(x), B, T, D, H)
    # at B = T the input [B, T, D] is [T, B, D] too, and read so this code is right: nothing to report
    assert caught(t, (ERROR, "attends-over-batch"), B == T)


@pytest.mark.parametrize("B,T,D,H", SEQ_FIRST_SIZES)
def test_seq_first_mha_fed_batch_first(B, T, D, H):
    mha = nn.MultiheadAttention(D, H).eval()                                  # batch_first=False
    t, _ = trace(lambda x, H: mha(x, x, x), B, T, D, H)
    assert caught(t, (ERROR, "attends-over-batch"), B == T)


@pytest.mark.parametrize("B,T,D,H", sizes((2, 8, 16, 4), (2, 16, 16, 4), (2, 4, 8, 2), (3, 12, 24, 3)))
def test_einops_splitting_tokens_into_heads(B, T, D, H):
    t, _ = trace(einops_tokens_into_heads, B, T, D, H)
    assert (ERROR, "mixed-axis") in found(t)


@pytest.mark.parametrize("B,T,D,H", sizes((2, 6, 64, 8), (2, 8, 64, 8), (2, 4, 16, 4)))
def test_softmax_over_features_after_permute(B, T, D, H):
    t, _ = trace(softmax_over_features, B, T, D, H)
    assert found(t) & {(ERROR, "softmax-wrong-axis"), (ERROR, "attends-over-features")}


SCALE_SIZES = sizes((2, 6, 64, 8), (2, 4, 16, 4), (2, 8, 16, 2), (3, 3, 27, 3))


@pytest.mark.parametrize("B,T,D,H", SCALE_SIZES)
def test_scaled_by_model_width(B, T, D, H):
    t, _ = trace(scaled(by_model_width=True), B, T, D, H)
    assert (WARNING, "scale-not-head-dim") in found(t)
    assert [d.kind for d in t.diagnostics if d.severity == ERROR] == []


@pytest.mark.parametrize("B,T,D,H", SCALE_SIZES)
def test_scaled_by_model_width_as_a_power(B, T, D, H):
    t, _ = trace(scaled_by_power, B, T, D, H)
    assert (WARNING, "scale-not-head-dim") in found(t)


@pytest.mark.parametrize("B,T,D,H", SCALE_SIZES)
def test_scaled_by_head_width_is_clean(B, T, D, H):
    t, dims = trace(scaled(by_model_width=False), B, T, D, H)
    assert loud(t) == []
    assert contradictions(t, dims) == []


# -- the head-split, softmax and merge classes, at equal sizes too ----------------------------------

#: Each class, what it must raise, and the sizes (B, T, D, H) it must be caught at; x named "B T D" or by
#: dims alone. The wide D 512 rows came from the former test_diagnose table, the small ones from this file's.
HEAD_CLASSES = [
    (skip_transpose, (ERROR, "mixed-axis"), [(2, 6, 64, 8), (3, 12, 48, 4), (2, 4, 8, 2), (2, 6, 512, 8),
                                            (2, 64, 512, 8), (2, 4, 512, 16)]),
    (reshape_not_transpose, (ERROR, "mixed-axis"), [(2, 6, 512, 8), (2, 64, 512, 8), (2, 4, 512, 16)]),
    (wrong_transpose, (ERROR, "attends-over-wrong-axis"), [(2, 6, 512, 8), (2, 64, 512, 8), (2, 4, 512, 16)]),
    (softmax_dim_minus_2, (ERROR, "softmax-wrong-axis"), [(2, 6, 64, 8), (2, 8, 64, 8), (2, 4, 16, 4), (4, 4, 8, 2),
                                                          (2, 6, 512, 8), (2, 64, 512, 8), (2, 4, 512, 16)]),
    (merge_without_transpose, (ERROR, "mixed-axis"), [(2, 6, 64, 8), (3, 12, 48, 4), (2, 4, 8, 2), (2, 6, 512, 8),
                                                      (2, 64, 512, 8), (2, 4, 512, 16)]),
    (batch_as_seq, (ERROR, "attends-over-batch"), [(2, 6, 512, 8), (2, 64, 512, 8), (2, 4, 512, 16)]),
]


@pytest.mark.parametrize("fn, expected, B, T, D, H, names", [
    pytest.param(fn, expected, *size, names, id=f"{fn.__name__}-B{size[0]}-T{size[1]}-D{size[2]}-H{size[3]}-{how}")
    for fn, expected, cases in HEAD_CLASSES for size in cases
    for names, how in ((None, "dims"), ("B T D", "named"))])
def test_each_head_class_is_caught(fn, expected, B, T, D, H, names):
    t, _ = trace(fn, B, T, D, H, names=names)
    assert expected in found(t)


@pytest.mark.parametrize("fn", [skip_transpose, reshape_not_transpose])
def test_skip_transpose_is_caught_when_T_equals_H(fn):
    """Shapes alone cannot see it at T = H; the names can."""
    t, _ = trace(fn, 2, 8, 512, 8, names="B T D")
    assert t.events[0].output.dims == ("B", "T", "H", "d_k")  # what memory really holds
    assert (ERROR, "attends-over-wrong-axis") in found(t)


@pytest.mark.parametrize("B,T,D,H", sizes((2, 8, 64, 8), (2, 4, 16, 4), (2, 8, 512, 8)))
def test_merge_without_transpose_at_T_equals_H(B, T, D, H):
    """At T = H the merge is a clean-looking [B, H, T*d_k]; the projection over it proves it wrong, so the
    reshape itself gets the error (naming the projection), and the projection, where the same bug shows,
    is listed under it (one finding per bug: engine/rules/causes.py)."""
    t, _ = trace(merge_without_transpose, B, T, D, H, names="B T D")
    assert (ERROR, "tokens-merged-with-features") in found(t)
    assert (WARNING, "tokens-merged-with-features") not in found(t)
    assert (ERROR, "projection-over-tokens") not in found(t)
    merged = next(e for e in t.events if e.op == "reshape")
    project = next(e for e in t.events if e.op == "linear" and e.index > merged.index)  # the output projection
    assert merged.output.dims == ("B", "H", "T*d_k")
    (d,) = [d for d in t.diagnostics if d.kind == "tokens-merged-with-features"]
    assert d.event == merged.index and d.message.endswith(
        f"axis 2 flattens T and d_k into one axis, so each of its entries is a (token, feature) pair. linear "
        f"#{project.index} then projects over that axis, so each output feature mixes tokens: the merge was not a "
        f"layout exercise.")   # (linear #N is named in it: no "Also seen at" repeats it)
    assert d.also == (project.index,)


class EinsumScores(nn.Module):
    """Scores by einsum over q/k/v projections named as Llama names them (the modules say which operand
    is the queries). ``subscripts`` with the keys' letter first in the output (``bhqd,bhkd->bhkq``) is the
    einsum form of ``k @ qᵀ`` (the softmax then weighs queries)."""

    def __init__(self, D: int, H: int, subscripts: str):
        super().__init__()
        self.H, self.subscripts = H, subscripts
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(D, D) for _ in range(3))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.H, D // self.H).transpose(1, 2)       # (B, H, T, d_k)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        w = torch.einsum(self.subscripts, q, k).softmax(dim=-1)               # (B, H, T, T)
        return torch.einsum("bhqk,bhkd->bhqd", w, v)                           # (B, H, T, d_k)


EINSUM_SIZES = [pytest.param(2, 5, 24, 3, id="distinct"), pytest.param(2, 4, 32, 4, id="T==H"),
                pytest.param(4, 4, 16, 4, id="B==T==H==d_k")]


@pytest.mark.parametrize("B,T,D,H", EINSUM_SIZES)
def test_einsum_scores_with_the_keys_on_the_rows(B, T, D, H):
    torch.manual_seed(0)
    model = EinsumScores(D, H, "bhqd,bhkd->bhkq").eval()
    with torch.no_grad(), shapetrace.trace(dims={"B": B, "T": T, "D": D, "H": H}) as t:
        model(torch.randn(B, T, D))
    (d,) = [d for d in t.diagnostics if d.kind == "query-key-swapped"]
    i = [e.index for e in t.events if e.op == "einsum"][0]
    assert (d.severity, d.event) == (ERROR, i)
    assert d.message.startswith(f"einsum #{i} ('bhqd,bhkd->bhkq') puts the tokens of the keys [B={B}, H={H}, T={T}, "
                                f"d_k={D // H}] on the scores' rows and those of the queries")
    correct = EinsumScores(D, H, "bhqd,bhkd->bhqk").eval()
    with torch.no_grad(), shapetrace.trace(dims={"B": B, "T": T, "D": D, "H": H}) as t:
        correct(torch.randn(B, T, D))
    assert [d.kind for d in t.diagnostics if d.kind == "query-key-swapped"] == []
    assert loud(t) == []
