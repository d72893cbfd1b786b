"""engine/mask_parts.py: the parts elementwise ops combined a mask from, for each call that takes one."""

from __future__ import annotations

import torch

import shapetrace


def _parts(fn, *inputs):
    with shapetrace.trace() as t:
        fn(*inputs)
    analysis = t.analysis()
    return {e.op: analysis.mask_parts.get(e.index) for e in analysis.events if e.index in analysis.mask_parts}


def test_a_mask_made_with_or_and_not_is_followed_to_its_parts():
    scores, pad = torch.randn(2, 3, 5, 5), torch.ones(2, 5, dtype=torch.bool)

    def fill(scores, pad):
        causal = torch.ones(5, 5, dtype=torch.bool).triu(1)                        # (T, T)
        return scores.masked_fill(causal | ~pad[:, None, :, None], -1e9)           # (B, H, T, T)

    assert _parts(fill, scores, pad) == {"masked_fill": {1: ((5, 5), (2, 1, 5, 1))}}


def test_a_mask_of_one_part_has_no_entry():
    scores, pad = torch.randn(2, 3, 5, 5), torch.ones(2, 5, dtype=torch.bool)

    def fill(scores, pad):
        return scores.masked_fill(~pad[:, None, None, :], -1e9)                    # (B, H, T, T)

    assert _parts(fill, scores, pad) == {}


def test_an_sdpa_mask_made_with_and_is_followed():
    q, pad = torch.randn(2, 3, 5, 4), torch.ones(2, 5, dtype=torch.bool)

    def attend(q, pad):
        mask = torch.ones(5, 5, dtype=torch.bool).tril()[None, None] & pad[:, None, None, :]   # (B, 1, T, T)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    assert _parts(attend, q, pad) == {"scaled_dot_product_attention": {3: ((1, 1, 5, 5), (2, 1, 1, 5))}}


def test_a_softmax_of_scores_a_bias_was_added_to_in_place_and_cast_is_followed():
    """``scores += bias`` (LayoutLMv3) and ``softmax(scores.float())`` (T5, LongT5): the in-place add and the cast
    remake the scores' node, and each is followed to what its operand was before it. On eea3781 a softmax had
    no entry, and a record that remade its own node was its operand's producer (the walk went round it)."""
    scores, bias = torch.randn(2, 3, 5, 5), torch.randn(3, 5, 5)

    def attend(scores, bias):
        scores += bias                                                              # (B, H, T, T)
        return torch.softmax(scores.float(), dim=-1)

    assert _parts(attend, scores, bias) == {"softmax": {0: ((2, 3, 5, 5), (3, 5, 5))}}


def test_an_expanded_part_is_followed_to_the_tensor_it_expands():
    """XGLM's 4-D mask (round 31): ``pad[:, None, :, None].expand(B, 1, T, T)`` added to a causal triangle. The
    expand broadcasts exactly as its source does, so the part is ``[B, 1, T, 1]`` (on the queries), not the
    ``[B, 1, T, T]`` that hid it. On fbe7f8f the part was the expand's shape (and round 31's XGLM
    ``padding-on-queries`` was ``?``)."""
    scores, pad = torch.randn(2, 3, 5, 5), torch.ones(2, 5)

    def attend(scores, pad):
        causal = torch.full((5, 5), -1e9).triu(1)[None, None]                      # (1, 1, T, T)
        padding = (1.0 - pad[:, None, :, None].expand(2, 1, 5, 5)) * -1e9           # (B, 1, T, T)
        return torch.softmax(scores + (causal + padding), dim=-1)

    assert _parts(attend, scores, pad) == {"softmax": {0: ((2, 3, 5, 5), (1, 1, 5, 5), (2, 1, 5, 1))}}
