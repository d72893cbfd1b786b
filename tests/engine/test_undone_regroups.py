"""shapetrace/engine/rules/undone_regroups.py: a regrouping that mixes batch, channels and rows is no mix of
tokens when only moves read it and they end in clean axes before anything computes (MobileViT's
``unfolding``); a move that ends mixed, or a mix that something computes on, keeps its error.

On main (90e1ad1) ``test_unfolding_then_a_norm_is_clean`` fails: ``reshape #1 turns [B, D, Hp, Wp] into
[!B·D·Hp/2, Hp%2, Wp/2, Wp%2]`` was ``✗ mixed-axis`` on MobileViT's correct unfolding (and its folding too:
tests/corpus/public14/mobilevit_unfold.py got two false errors)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import shapetrace


def _traced(fn, x):
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=8") as t:
        shapetrace.name(x, "B D Hp Wp")
        fn(x)
    return t


def _unfold(x, p=2):                                  # (B, C, H, W) -> (B * P, N, C)
    B, C, H, W = x.shape
    n_h, n_w = H // p, W // p
    patches = x.reshape(B * C * n_h, p, n_w, p).transpose(1, 2)
    patches = patches.reshape(B, C, n_h * n_w, p * p).transpose(1, 3)
    return patches.reshape(B * p * p, n_h * n_w, C)


def _errors(t):
    return [(d.kind, t.events[d.event].op, d.event) for d in t.diagnostics if d.severity == "error"]


def test_unfolding_then_a_norm_is_clean():
    t = _traced(lambda x: F.layer_norm(_unfold(x), (8,)), torch.randn(2, 8, 4, 6))
    assert [e.outputs[0].dims for e in t.events[:5]] == [
        ("!B*D*Hp/2", "Hp%2", "Wp/2", "Wp%2"), ("!B*D*Hp/2", "Wp/2", "Hp%2", "Wp%2"),
        ("B", "D", "Hp/2*Wp/2", "Hp%2*Wp%2"), ("B", "Hp%2*Wp%2", "Hp/2*Wp/2", "D"),
        ("B*Hp%2*Wp%2", "Hp/2*Wp/2", "D")]
    assert _errors(t) == []
    assert t.report().verdict.line.startswith("✓ checked all 6 ops")


def test_the_mix_read_by_a_norm_keeps_its_error():
    def norm_the_mix(x):
        B, C, H, W = x.shape
        F.layer_norm(x.reshape(B * C * 2, 2, 3, 2).transpose(1, 2), (2,))
    assert _errors(_traced(norm_the_mix, torch.randn(2, 8, 4, 6))) == [("mixed-axis", "reshape", 0),
                                                                   ("norm-over-tokens", "layer_norm", 2)]


def test_a_move_that_ends_mixed_keeps_its_error():
    def fold_without_transpose(x):                   # MobileViT's folding with its transpose(1, 2) left out
        B, C, H, W = x.shape
        y = x.reshape(B * C * 2, 2, 3, 2).transpose(1, 2).reshape(B, C, H, W)
        F.layer_norm(y.permute(0, 2, 3, 1), (8,))
    assert _errors(_traced(fold_without_transpose, torch.randn(2, 8, 4, 6))) == [("mixed-axis", "reshape", 0)]
