"""engine/unattended: the rows whose dependence on a later token is no leak of the causal mask."""

from __future__ import annotations

import importlib

import torch

import shapetrace
from shapetrace.engine.unattended import masked_rows, unattended_rows


class _Record:
    def __init__(self, **params):
        self.params = params


def test_a_masks_bidirectional_blocks_are_read_as_rows_and_a_shared_mask_holds_for_every_entry():
    """``future_blocks`` (engine/directions.opened_future) read like ``no_key_left``; a mask without a batch axis
    (flags ``[T]``) holds for every batch entry (on eea3781 it was skipped: ``numel % (B·T)``)."""
    rows = masked_rows([_Record(future_blocks=((6,), (4,))), _Record(no_key_left=((2, 6), (0, 6))), _Record()])
    assert [r.shape for r in rows] == [torch.Size([6]), torch.Size([2, 6])]
    assert unattended_rows(rows[:1], 2, 6) == frozenset({(0, 4), (1, 4)})
    assert unattended_rows(rows[1:], 2, 6) == frozenset({(0, 0), (1, 0)})


def _measured(bug: str):
    m = importlib.import_module("tests.corpus.reports11.gemma3_images_future")
    model, inputs = m.build(bug)
    with torch.no_grad(), shapetrace.trace(dims=m.DIMS[0], dependencies=True) as t:
        model(*inputs)
    return [f"{d.severity} {d.kind}" for d in t.diagnostics if d.severity in ("error", "warning")]


def test_a_token_that_sees_the_rest_of_its_image_is_no_leak_and_one_that_sees_a_later_image_is():
    """transformers issue #38053 (reports11/gemma3_images_future), measured on the values: the correct mask's
    token 4 depends on token 5, the other token of its image, by design (``error causal-mask-leaks`` on eea3781,
    a false error on correct code); the bug's token 1 (the first image) depends on token 5 (the second)."""
    assert _measured("") == []
    assert _measured("all-images-bidirectional") == ["error causal-mask-leaks", "warning mask-skips-ahead"]


def test_a_row_even_on_every_key_a_second_mask_left_it_is_set_aside_and_one_key_alone_is_not():
    """A query with no key left under two added masks (a key hidden by both overflows to ``-inf``, weight 0) is
    even on the other keys: set aside; a row of random weights, or one weight 1, is not (on 062deef the first
    was read as attending, so reports13/gpt2_left_pad_positions' left padding made a false causal-mask-leaks)."""
    from shapetrace.engine.unattended import uniform_rows

    w = torch.tensor([[[0.2, 0.0, 0.2, 0.2, 0.2, 0.2],
                       [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                       [0.5, 0.3, 0.2, 0.0, 0.0, 0.0],
                       [1 / 6] * 6]])
    assert [r.tolist() for r in uniform_rows([(None, w)])] == [[[True, False, False, True]]]


def test_gpt2_left_padding_under_two_masks_is_no_leak():
    """ndif-team/nnsight #672 (reports13/gpt2_left_pad_positions), measured on the values: the left-padded row's
    query 0 (``where(causal, w, min)`` then ``+ (1 - mask) * min``) reads later tokens evenly by design; on
    062deef the correct file got ``error causal-mask-leaks`` (a false error on correct code)."""
    m = importlib.import_module("tests.corpus.reports13.gpt2_left_pad_positions")
    with torch.no_grad(), shapetrace.trace(dims=m.DIMS[0], dependencies=True) as t:
        model, inputs = m.build("")   # (built under the trace, as ``shapetrace trace`` runs it: the tril buffer)
        model(*inputs)
    assert [f"{d.severity} {d.kind}" for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert "the causal mask holds" in t.report().verdict.line
