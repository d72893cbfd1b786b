"""The copies an addition keeps for the analysis (engine/kept_copies.py): values as they were at the call, in
buffers lent again only once no record holds them."""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.engine.kept_copies import KeptCopies


def test_a_copy_holds_the_values_at_the_call_not_later_writes():
    copies = KeptCopies()
    mask = torch.zeros(4, 4)                                          # (T, T)
    kept = copies.copy(mask)
    mask.fill_(float("-inf"))                                         # written in place after the call
    assert kept is not mask and torch.equal(kept, torch.zeros(4, 4))


def test_a_buffer_is_lent_again_only_when_nothing_holds_it():
    copies = KeptCopies()
    first = copies.copy(torch.ones(2, 3))
    second = copies.copy(torch.full((2, 3), 2.0))                    # the first is still held: a new buffer
    assert first is not second and torch.equal(first, torch.ones(2, 3))
    address = second.data_ptr()
    del second                                                        # its trace is gone ...
    copies.start()                                                    # ... and the next one starts
    third = copies.copy(torch.full((2, 3), 3.0))                     # the second's buffer, free again
    assert third.data_ptr() == address and torch.equal(third, torch.full((2, 3), 3.0))
    assert torch.equal(first, torch.ones(2, 3))


def test_an_expanded_or_grad_requiring_operand_is_copied_whole_and_detached():
    """A mask broadcast with ``expand`` (stride 0) is copied element by element; a residual stream that
    requires grad gives a copy outside autograd."""
    copies = KeptCopies()
    row = torch.tensor([0.0, float("-inf")]).expand(3, 2)            # (T, T_k), stride (0, 1)
    x = torch.randn(2, 3, requires_grad=True)
    kept_row, kept_x = copies.copy(row), copies.copy(x * 2)
    assert kept_row.stride() == (2, 1) and torch.equal(kept_row, row)
    assert not kept_x.requires_grad and kept_x.grad_fn is None and torch.equal(kept_x, (x * 2).detach())


def test_buffers_beyond_the_pool_are_plain_copies(monkeypatch):
    from shapetrace.engine import kept_copies

    monkeypatch.setattr(kept_copies, "POOL_BYTES", 16)
    copies = KeptCopies()
    copies.copy(torch.ones(2))                                        # 8 bytes: pooled
    copies.copy(torch.ones(4))                                        # 16 more: over, not pooled
    assert [tuple(k[1]) for k in copies.buffers] == [(2,)] and copies.pooled == 8


def test_a_sparse_operand_is_kept_as_it_is():
    """A sparse mask (``to_sparse()``) has no contiguous copy: it is kept itself, as before copies."""
    mask = torch.eye(3).to_sparse()
    assert KeptCopies().copy(mask) is mask


def test_a_trace_looks_at_each_buffer_once(monkeypatch):
    """A training loop traced whole adds the same mask shape again and again (an additive mask,
    ``scores + mask``, as transformers' GPT-2 and Bloom add it): while one trace records, none of its own
    copies is free, so a copy looks only at buffers it has not looked at since the trace started. Here an
    earlier trace is still held (its 100 buffers too) and the next makes 100 copies: 100 looks, where
    looking from the start each time made 100 * 100 + 100 * 99 / 2 = 14,950."""
    from shapetrace.engine import kept_copies

    looks = []
    monkeypatch.setattr(kept_copies, "_refcount", lambda buf: looks.append(1) or 99)   # every buffer held
    copies = KeptCopies()
    copies.start()
    earlier = [copies.copy(torch.zeros(1, 1, 4, 4)) for _ in range(100)]   # (B, 1, T, T), still held
    copies.start()
    later = [copies.copy(torch.zeros(1, 1, 4, 4)) for _ in range(100)]
    assert len(looks) == 100 and len(copies.buffers[(torch.float32, torch.Size([1, 1, 4, 4]), False)]) == 200
    assert len({k.data_ptr() for k in earlier + later}) == 200


def test_a_buffer_freed_by_a_trace_gone_is_lent_to_the_next_trace():
    copies = KeptCopies()
    copies.start()
    held = [copies.copy(torch.ones(3)) for _ in range(3)]
    address = held[1].data_ptr()
    del held[1]                                                       # that trace's record is gone
    copies.start()                                                    # the next trace
    again = copies.copy(torch.full((3,), 5.0))
    assert again.data_ptr() == address and torch.equal(again, torch.full((3,), 5.0))
    assert all(torch.equal(h, torch.ones(3)) for h in held)


def test_a_trace_under_inference_mode_then_one_outside_it_both_run():
    """transformers' pipelines run the model under ``torch.inference_mode()`` (``Pipeline.forward``'s
    ``inference_context``); a notebook then traces a training step. A buffer made under inference mode is
    an inference tensor, which torch refuses to write outside that mode: lent to the next trace's copy, it
    made the user's own addition raise ("Inplace update to inference tensor outside InferenceMode")."""
    x, mask = torch.randn(2, 4, 4), torch.triu(torch.full((4, 4), float("-inf")), 1)   # (B, T, T), (T, T)
    with torch.inference_mode():
        with shapetrace.trace(dims="B=2 T=4") as served:
            (x + mask).softmax(-1)                                   # an additive causal mask
    del served   # its copies are free again
    with shapetrace.trace(dims="B=2 T=4") as trained:
        scores = x + mask
    assert torch.equal(scores, x + mask) and trained.exception is None
    with torch.inference_mode():                                     # and back: the first mode's buffer again
        with shapetrace.trace(dims="B=2 T=4") as served_again:
            x + mask
    assert served_again.exception is None
