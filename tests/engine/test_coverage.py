"""The all-clear is said only where it was proven (issue 21): every axis of every op named."""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.engine.coverage import all_clear_text, unchecked_ops


def _attention(x, H, mask=None):
    B, T, D = x.shape                                               # (B, T, D)
    q = x.view(B, T, H, D // H).transpose(1, 2)                     # (B, H, T, d_k)
    scores = q @ q.transpose(-2, -1)                                # (B, H, T, T)
    if mask is not None:
        scores = scores.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))   # nanoGPT's bias buffer
    return scores.softmax(dim=-1)


def test_every_axis_named_gets_the_full_all_clear():
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3)
    assert unchecked_ops(t.events) == []
    assert all_clear_text(t.events) == "✓ no errors or warnings: every axis keeps its meaning from input to output"


def test_an_unnamed_mask_slice_is_said_not_checked():
    """nanoGPT's ``self.bias[:, :, :T, :T]`` (a [1, 1, 8, 8] buffer): its slice has no names, so the
    all-clear covers the named axes only and says which op was not checked."""
    bias = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        _attention(torch.randn(2, 5, 24), 3, bias)
    ops = {e.index: e.op for e in t.events}
    missing = unchecked_ops(t.events)
    assert [ops[i] for i in missing] == ["__getitem__"]
    assert all_clear_text(t.events) == (
        f"✓ no errors or warnings among the named axes; 1 of {len(t.events)} ops has unnamed axes, which were "
        f"not checked (#{missing[0]} __getitem__)")


def test_no_head_split_note_on_axes_with_no_name():
    """Patches cut from pixels by unfold (gupta-abhay/pytorch-vit#7) have no names; a view of them is
    not called a nonstandard head split of D: nothing is known of what it spreads."""
    pixels = torch.randn(2, 3, 16, 16)
    with shapetrace.trace(dims="B=2 T=16 D=24 H=3") as t:
        pixels.unfold(2, 4, 4).unfold(3, 4, 4).contiguous().view(2, -1, 48)     # (B, ?, ?)
    assert [d.kind for d in t.diagnostics if d.kind == "nonstandard-head-split"] == []
