"""engine/rolls.py and rules/rolls.py: tokens shifted round by ``torch.roll``, attended in the shifted
frame, then met unshifted (Swin's shifted windows without the roll back) are an error; a roll undone,
a shift meant (``x - torch.roll(x, 1, 1)``) or a roll met by other tokens is not."""

from __future__ import annotations

import torch

import shapetrace


def attend(x):
    """Attention over the tokens of ``x`` [B, T, D] with q = k = v = x (enough for the shift to travel)."""
    w = (x @ x.transpose(1, 2)).softmax(dim=-1)                       # (B, T, T)
    return w @ x                                                       # (B, T, D)


def kinds(t) -> list[str]:
    return [d.kind for d in t.diagnostics]


def test_a_roll_attended_and_added_back_unrolled_is_an_error_at_the_roll():
    x = torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        shifted = torch.roll(x, shifts=-2, dims=1)                     # (B, T, D), tokens 2 places on
        x + attend(shifted)                                            # residual, the roll back forgotten
    found = [d for d in t.diagnostics if d.kind == "roll-not-undone"]
    assert len(found) == 1 and found[0].event == 0 and found[0].severity == "error"
    assert found[0].message.startswith("roll #0 shifts T by -2, and nothing shifts them back before a later add")
    assert t.report().verdict.mark == "✗"


def test_a_roll_undone_before_the_residual_is_silent():
    x = torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        y = attend(torch.roll(x, shifts=-2, dims=1))
        x + torch.roll(y, shifts=2, dims=1)
    assert "roll-not-undone" not in kinds(t)


def test_a_shift_meant_is_silent():
    """Differences between neighbouring tokens, or a token shift mixed in at once: no attention between
    the roll and the meeting, so the shift is what the code means."""
    x = torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        x - torch.roll(x, 1, 1)
        attend(x * 0.5 + torch.roll(x, 1, 1) * 0.5)
    assert "roll-not-undone" not in kinds(t)


def test_a_roll_met_by_other_tokens_is_silent():
    """Rolled tokens of ``x`` added to ``y``, which did not come from ``x``: no shift to compare."""
    x, y = torch.randn(2, 6, 4), torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        y + attend(torch.roll(x, shifts=1, dims=1))
    assert "roll-not-undone" not in kinds(t)


def test_a_named_input_is_followed_as_the_same_tensor():
    x = torch.randn(4, 4, 4)                                            # B = T = D = 4
    with shapetrace.trace(dims="B=4 T=4 D=4") as t:
        shapetrace.name(x, "B T D")
        x + attend(torch.roll(x, shifts=1, dims=1))
    assert kinds(t).count("roll-not-undone") == 1


def test_a_roll_back_on_mixed_axes_makes_no_claim():
    """Rolled back, but along axes that no longer hold one piece of the tokens each (windows put back
    together wrongly: the mixed axis is the finding there); where the tokens are is no longer followed,
    so "nothing shifts them back" is not said."""
    x = torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        y = attend(torch.roll(x, shifts=1, dims=1))                    # (B, T, D)
        z = y.transpose(1, 2).reshape(2, 6, 4)                          # (B, ?, ?): tokens and features mixed
        x + torch.roll(z, shifts=-1, dims=1)
    assert "roll-not-undone" not in kinds(t)
