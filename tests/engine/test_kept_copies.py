"""The copies an addition keeps for the analysis (engine/kept_copies.py): values as they were at the call, in
buffers lent again only once no record holds them."""

from __future__ import annotations

import torch

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
    del second
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
