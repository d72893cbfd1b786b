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


# -- flips: a reversal followed as a roll is (failing on 01f2f59: a flip was no shift, and nothing was said) --------

def backward_states(x, gru, back_along: int):
    """A backward recurrence (EderSantana/seya issue #32): ``gru`` run on the tokens read backwards, its states
    flipped along ``back_along`` (1 puts them in the tokens' order again; 0 reverses the batch instead)."""
    states, _ = gru(x.flip(1))
    return states.flip(back_along)


def test_a_backward_recurrence_not_flipped_back_in_time_is_an_error_at_the_flip():
    torch.manual_seed(0)
    x, gru_f, gru_b = torch.randn(2, 6, 4), torch.nn.GRU(4, 2, batch_first=True), torch.nn.GRU(4, 2, batch_first=True)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=4") as t:
        shapetrace.name(x, "B T D")
        torch.cat([gru_f(x)[0], backward_states(x, gru_b, back_along=0)], dim=-1)
    found = [d for d in t.diagnostics if d.kind == "roll-not-undone"]
    assert [(d.event, d.severity) for d in found] == [(1, "error"), (3, "error")]   # (time still reversed; batch)
    assert found[0].message.startswith("flip #1 reverses T, and nothing reverses it back before a later cat lines "
                                       "the result up with the same tokens in their order")
    assert found[1].message.startswith("flip #3 reverses B, and nothing reverses it back before a later cat")
    assert t.report().verdict.mark == "✗"


def test_a_backward_recurrence_flipped_back_in_time_is_silent():
    torch.manual_seed(0)
    x, gru_f, gru_b = torch.randn(2, 6, 4), torch.nn.GRU(4, 2, batch_first=True), torch.nn.GRU(4, 2, batch_first=True)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=4") as t:
        shapetrace.name(x, "B T D")
        torch.cat([gru_f(x)[0], backward_states(x, gru_b, back_along=1)], dim=-1)
    assert [e.params.get("reversed") for e in t.events if e.op == "flip"] == [(1,), (1,)]
    assert "roll-not-undone" not in kinds(t)


def test_a_flip_meant_and_a_join_along_the_flipped_axis_are_silent():
    """A sequence and its mirror mixed at once (no mixer between), and a palindrome built by a ``cat`` along the
    reversed tokens after an attention: neither lines a token up with another's values by mistake."""
    x = torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        x + x.flip(1)
        torch.cat([x, attend(x.flip(1))], dim=1)
    assert "roll-not-undone" not in kinds(t)


def test_a_sequence_and_its_mirror_joined_along_the_batch_are_no_longer_followed():
    """Test-time augmentation: the tokens and their mirror attended as one batch, the mirror's half flipped back
    and averaged with the other: the ``cat`` holds both frames, so no claim is made after it (failing before
    this commit: the join passed on its first operand's frame, and the flip back read as a reversal)."""
    x = torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        out = attend(torch.cat([x, x.flip(1)], dim=0))
        out[:2] + out[2:].flip(1)
    assert "roll-not-undone" not in kinds(t)
