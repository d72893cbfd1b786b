"""shapetrace/engine/infer/einops.py: an einops pattern that calls an axis ``h`` where it holds tokens.

A pattern's ``h`` that is exactly one whole grid axis (``Hp``: the image's height, as latent diffusion's
``'b (h w) c -> b c h w'`` folds the tokens back into the feature map) splits no tokens. On 8110233 that
fold of a feature map named ``[B, D, Hp, Wp]`` was a false ``mixed-axis`` error (test below); tokens split
into blocks by a pattern's ``h`` still are one."""

from __future__ import annotations

import torch
from einops import rearrange

import shapetrace

DIMS = "B=2 Hp=3 Wp=5 D=32 H=4"


def _kinds(t):
    return [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"]


def test_a_feature_map_folded_back_by_its_height_and_width_is_no_head_split():
    x = torch.randn(2, 32, 3, 5)
    with shapetrace.trace(dims=DIMS) as t:
        shapetrace.name(x, "B D Hp Wp")
        tokens = rearrange(x, "b c h w -> b (h w) c")                      # (B, N, D)
        rearrange(tokens, "b (h w) c -> b c h w", h=3, w=5)               # (B, D, Hp, Wp)
    assert _kinds(t) == []
    assert t.events[-1].outputs[0].dims == ("B", "D", "Hp", "Wp")


def test_tokens_cut_into_blocks_by_a_patterns_h_are_still_a_mixed_axis():
    x = torch.randn(2, 12, 32)
    with shapetrace.trace(dims="B=2 T=12 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        rearrange(x, "b (h n) d -> b h n d", h=4)                         # bug: the tokens split
    assert _kinds(t) == [("error", "mixed-axis")]
