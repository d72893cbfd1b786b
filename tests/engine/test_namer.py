"""engine/namer.py: a piece of a root that lies inside one of its named pieces is said in that name
(where D = H·d_k, the head axis cut in two is ``H/2`` and ``H%2``, never ``D/12`` and ``D/6%2``), so an
exercise's trace names axes with the exercise's own names, as its verdict does."""

from __future__ import annotations

import pytest
import torch


def _split_heads_without_transpose(x, heads):
    """The bug FuxiCTR issue #30 reports in three models: ``view(B, H, T, d_k)`` straight from
    [B, T, D] (the split-heads exercise's first known mistake)."""
    B, T, D = x.shape
    return x.view(B, heads, T, D // heads)


def _split_heads(x, heads):
    """The Annotated Transformer's split: view as [B, T, H, d_k], then transpose(1, 2)."""
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)


def _names(fn, B, T, H, d_k):
    from shapetrace.engine.formatting import fmt_shape
    from shapetrace.exercises.calls import call

    out = call(fn, [torch.randn(B, T, H * d_k), H], ["B T D", None], dict(B=B, T=T, D=H * d_k, H=H))
    return [fmt_shape(e.output) for e in out.trace.events]


def test_a_split_head_axis_is_named_in_heads_not_in_features():
    # T = 2 divides H = 8: axis 1 holds T and the top half of each head index, axis 2 its last bit
    assert _names(_split_heads_without_transpose, 4, 2, 8, 6) == ["[B=4, !T·H/2=8, H%2=2, d_k=6]"]


@pytest.mark.parametrize("B, T, H, d_k", [(4, 2, 8, 6), (6, 5, 9, 8), (4, 4, 4, 4)])
def test_the_correct_split_keeps_its_plain_names(B, T, H, d_k):
    assert _names(_split_heads, B, T, H, d_k) == [f"[B={B}, T={T}, H={H}, d_k={d_k}]",
                                                  f"[B={B}, H={H}, T={T}, d_k={d_k}]"]


def test_a_piece_at_the_end_of_a_root_keeps_the_roots_name():
    """Interleaved heads (``view(B, T, d_k, H)``, a layout some ports use): its pieces straddle H and d_k
    or sit at D's last digits, so they stay pieces of D."""
    import shapetrace

    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        torch.randn(2, 6, 64).view(2, 6, 8, 8)
    assert t.events[0].output.dims == ("B", "T", "D/8", "D%8")


def test_joins_of_the_same_parts_in_another_order_clash_in_a_broadcast():
    """Idefics2's padding mask extended with the latents' ones in front (``3+T``) against keys that join the
    latents behind the context (``T+3``), tests/corpus/public17/idefics2_resampler.py latent-mask-first: entry i
    of one is another part's entry than entry i of the other. On af0e286 (main) no clash (both are tokens)."""
    from shapetrace.engine.namer import Namer

    namer = Namer({"B": 2, "T": 6, "D": 32, "H": 4})
    scores, mask = (("B", "H", "3", "T+3"), (2, 4, 3, 9)), (("B", None, None, "3+T"), (2, 1, 3, 9))
    assert namer.broadcast_clash([scores, mask]) == (1, 0, 1)
    assert namer.broadcast_clash([scores, (("B", None, None, "T+3"), (2, 1, 3, 9))]) is None
    assert namer.broadcast_clash([(("B", "T+T"), (2, 12)), (("B", "T+T"), (2, 12))]) is None


def test_a_sum_joined_into_a_product_is_parenthesised():
    """ConvBERT's mixed attention (tests/corpus/public36/convbert.py): the attention heads and the conv heads,
    each ``[B, T, H, d_k]``, ``cat``ed along heads (``H+H``) and merged with ``d_k`` by ``view(B, T, 2·H·d_k)``.
    The merged axis is ``(H+H)*d_k`` (64); on 9edba10 (main) it was labelled ``H+H*d_k``, which reads 4 + 32."""
    import shapetrace

    with shapetrace.trace(dims="B=2 T=6 D=64 H=4 d_k=8") as t:
        x = torch.randn(2, 6, 4, 8)
        torch.cat([x, x * 2], 2).view(2, 6, 64)
    assert t.events[-2].output.dims == ("B", "T", "H+H", "d_k")
    assert t.events[-1].output.dims == ("B", "T", "(H+H)*d_k")


def test_a_fold_of_no_one_role_clashes_only_with_a_role_none_of_its_parts_has():
    """``B*H`` (batch and heads: no one role) lined up with ``T`` pairs queries with batch-and-head pairs; with
    another ``B*H`` it is no clash. On c32db91 the fold was never compared (no role)."""
    from shapetrace.engine.namer import Namer, fold_roles

    namer = Namer({"B": 2, "T": 8, "D": 32, "H": 4})
    assert fold_roles(namer, "B*H") == ("batch", "heads")
    assert fold_roles(namer, "H*d_k") == fold_roles(namer, "T") == fold_roles(namer, "(H+H)*d_k") == ()
    assert namer.broadcast_clash([(("B*H", "T", "T"), (8, 8, 8)), (("T", "B*H", "T"), (8, 8, 8))]) == (2, 0, 1)
    assert namer.broadcast_clash([(("B*H", "T", "T"), (8, 8, 8)), (("B*H", None, "T"), (8, 1, 8))]) is None
