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
