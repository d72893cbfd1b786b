"""engine/infer/counted: an index the trace counted itself (``arange``, then moved, sliced or offset) is replayed
with its values, so a pick by it is a plain walk over the axes it picks in order; and ``x[...]`` picks from a
boolean ``x`` as data.

transformers 5's masks (masking_utils ``padding_mask_function``: ``padding_mask[batch_idx, kv_idx]`` with
``batch_idx = arange(B)[:, None, None, None]`` and ``kv_idx = arange(T)[None, None, None, :]``) left the padding
mask unnamed on 6527aa1: every BERT-like model fed a padded batch was ``?`` (lib17: ``bigbird-padded``)."""

from __future__ import annotations

import torch

import shapetrace


def _dims(t, op="__getitem__"):
    return [e.outputs[0].dims for e in t.events if e.op == op]


def test_a_boolean_padding_mask_picked_by_counted_indices_is_named():
    """Fails on 6527aa1: the pick was ``(None, None, None, None)`` (a boolean operand was never replayed)."""
    x = torch.randn(2, 6, 8)
    padding = torch.ones(2, 6, dtype=torch.bool)
    padding[1, 4:] = False
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(padding, "B T")
        batch_idx = torch.arange(x.shape[0])[:, None, None, None]              # (B, 1, 1, 1)
        kv_idx = torch.arange(x.shape[1])[None, None, None, :]                 # (1, 1, 1, T)
        padding[batch_idx, kv_idx]                                             # (B, 1, 1, T)
    assert _dims(t) == [("B", None, None, None), (None, None, None, "T"), ("B", None, None, "T")]


def test_a_float_picked_by_counted_indices_in_order_keeps_its_names():
    """Fails on 6527aa1: ``('B[index]', 'T[index]', 'D')``, a pick by unknown indices."""
    x = torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        shapetrace.name(x, "B T D")
        x[torch.arange(x.shape[0])[:, None], torch.arange(x.shape[1])[None, :]]   # (B, T, D)
    assert _dims(t)[-1] == ("B", "T", "D")


def test_a_shifted_or_reversed_count_is_no_walk_in_order():
    """The control: ``arange(5) + 1`` (tokens 1 to 5) and a reversed count pick other tokens than ``T`` in
    order, so they stay picks (``T[b]``), as any index (unchanged from 6527aa1)."""
    x = torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        shapetrace.name(x, "B T D")
        b = torch.arange(2)
        x[b[:, None], torch.arange(5)[None, :] + 1]                            # (B, 5, D): tokens 1..5
        x[b[:, None], torch.arange(5, -1, -1)[None, :]]                        # (B, T, D): reversed
    picks = [d for d in _dims(t) if len(d) == 3]
    assert picks == [("B[b]", "T[b]", "D"), ("B[b]", "T[b]", "D")]


def test_a_table_picked_per_head_by_a_counted_index_takes_the_heads():
    """attention-gym's ALiBi (tests/corpus/reports6/attention_gym_alibi_sign.py): ``alibi_bias[h]`` with ``h =
    arange(H)[None, :, None, None]`` walks the table's unnamed axis in order; the pick takes the index's ``H``."""
    table = torch.randn(4)
    scores = torch.randn(2, 4, 6, 6)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(scores, "B H T T")
        h = torch.arange(scores.shape[1])[None, :, None, None]                 # (1, H, 1, 1)
        table[h]                                                               # (1, H, 1, 1)
    assert _dims(t)[-1] == (None, "H", None, None)


def test_a_count_of_another_axis_walking_in_order_by_equal_sizes_keeps_the_index_name():
    """tests/corpus/public21/yarn_rope.py ``positions-from-batch`` at B = T: ``cos[arange(B)]`` walks the table's
    ``T`` in order only because B = T; the index counts ``B``, and that name stands (equal sizes never decide)."""
    cos = torch.randn(4, 8)
    x = torch.randn(4, 4, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=4 T=4 D=8") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(cos, "T D")
        ids = torch.arange(x.shape[0]).unsqueeze(0).expand(x.shape[0], -1)       # (B, B): a count of B
        cos[ids]                                                               # (B, B, D)
    assert _dims(t)[-1] == ("B", "B", "D")


def test_a_size_read_plus_a_literal_zero_is_that_size_read():
    """transformers 5's ``kv_length = query_length + past_seen_tokens`` before any cache (0): ``arange(kv_length)``
    counts the tokens. Fails on 6527aa1: ``arange(T + 0)`` was unnamed (a sum with a plain 0 named nothing); a sum
    with another number stays unnamed (the control)."""
    x = torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        shapetrace.name(x, "B T D")
        torch.arange(x.shape[1] + 0)[None, :]                                  # (1, T)
        torch.arange(0 + x.shape[1])[None, :]                                  # (1, T)
        torch.arange(x.shape[1] + 1)[None, :]                                  # (1, 7): T + 1, no name
    assert _dims(t) == [(None, "T"), (None, "T"), (None, None)]
