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


def _cvt_fold(dims, h, w):
    """CvT's ``forward_conv``: the class token split off the ``1+N`` tokens, the rest folded ``'b (h w) c -> b c
    h w'``. The tokens' grid name is lost at the ``cat`` (``1+N``), so ``h`` is a piece of the tokens ``N``."""
    x = torch.randn(2, 32, h, w)
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B D Hp Wp")
        tokens = rearrange(x, "b c h w -> b (h w) c")                      # (B, N, D)
        tokens = torch.cat((torch.zeros(2, 1, 32), tokens), dim=1)          # (B, 1+N, D)
        _, patches = torch.split(tokens, [1, h * w], 1)                     # (B, N, D)
        rearrange(patches, "b (h w) c -> b c h w", h=h, w=w)              # (B, D, Hp, Wp)
    return t


def test_tokens_of_a_declared_grid_folded_back_after_a_class_token_is_no_head_split():
    """On f714c55 (main) CvT's fold after the class token was split off was a false ``✗ mixed-axis`` ("names an
    axis h (heads), but ... holds pieces of the tokens"): the piece is the grid's height ``Hp`` (3 rows of 5)."""
    t = _cvt_fold("B=2 Hp=3 Wp=5 D=32 H=4", 3, 5)
    assert _kinds(t) == []
    assert t.events[-1].outputs[0].dims == ("B", "D", "Hp", "Wp")


def test_a_grid_as_tall_as_the_heads_are_many_leaves_the_piece_unnamed():
    """Hp = H = 4: the same fold reads as a split of the tokens into 4 heads; equal sizes decide nothing, so
    the axis gets no name and no error (on f714c55: ``✗ mixed-axis``)."""
    t = _cvt_fold("B=2 Hp=4 Wp=5 D=32 H=4", 4, 5)
    assert _kinds(t) == []
    assert t.events[-1].outputs[0].dims == ("B", "D", None, "Wp")


def test_a_letter_the_pattern_cuts_from_a_whole_grid_axis_is_no_head_split():
    """BiFormer's regions (tests/corpus/public41/biformer_bra.py): ``'n (j h) (i w) c -> n (j i) h w c'`` over an
    NHWC map ``[B, Hp, Wp, D]``: ``h`` is the rows within a region, cut by the pattern's own input side from the
    whole axis ``Hp``. On 99e5d98 it was a false ``✗ mixed-axis`` ("names an axis h, but ... holds pieces of the
    tokens that are neither the heads nor the declared grid's rows"). The same letter cut from flattened tokens
    ``N`` still splits the tokens into heads (an error)."""
    x = torch.randn(2, 4, 6, 32)
    with shapetrace.trace(dims="B=2 Hp=4 Wp=6 D=32 H=4") as t:
        shapetrace.name(x, "B Hp Wp D")
        rearrange(x, "n (j h) (i w) c -> n (j i) h w c", j=2, i=2)          # (B, regions, h, w, D)
    assert _kinds(t) == []
    assert t.events[-1].outputs[0].dims[2:] == ("Hp%2", "Wp%3", "D")
    tokens = torch.randn(2, 24, 32)
    with shapetrace.trace(dims="B=2 Hp=4 Wp=6 D=32 H=2") as t:
        shapetrace.name(tokens, "B N D")
        rearrange(tokens, "b (h n) d -> b h n d", h=2)                      # bug: the tokens split
    assert _kinds(t) == [("error", "mixed-axis")]


def _pooled_and_repeated(x, count):
    from einops import repeat

    g = x.sum(dim=1)                                                        # (B, D)
    return repeat(g, "b d -> b n d", n=count)                               # (B, T, D)


def test_a_pattern_axis_of_a_size_read_from_an_axis_takes_that_axis_once_einops_cached_the_recipe():
    """SwiftFormer's ``einops.repeat(G, 'b d -> b repeat d', repeat=key.shape[1])``
    (tests/corpus/reports33/swiftformer_additive_softmax.py). einops caches a pattern's recipe by its shapes
    and lengths, so once the model ran untraced (a warm-up, the untraced check of a round) the traced call
    hands torch the cached plain 24, not the size read from ``key``: on 6527aa1 the grown axis was unnamed and
    the file ``? 19 of 20 (not checked: expand)``. The pattern's own length argument still holds the read size:
    the axis is that axis. A literal count names nothing (equal sizes never decide a name)."""
    x = torch.randn(2, 6, 32)
    _pooled_and_repeated(x, x.shape[1])                                     # (the recipe cached, untraced)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        shapetrace.name(x, "B T D")
        _pooled_and_repeated(x, x.shape[1])
    assert t.events[-1].outputs[0].dims == ("B", "T", "D")
    assert t.report().verdict.mark == "✓"
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        shapetrace.name(x, "B T D")
        _pooled_and_repeated(x, 6)
    assert t.events[-1].outputs[0].dims == ("B", None, "D")


def _video_fold(bug=False):
    """Latte's ``rearrange(x, 'b f c h w -> (b f) c h w')`` over an unnamed video latent whose height (4) equals
    ``H``; its twin cuts heads from named features (``'b t (h d) -> b h t d'``), which still names ``H``."""
    with shapetrace.trace(dims="B=2 T=3 D=32 H=4") as t:
        video = torch.randn(2, 3, 5, 4, 7)
        out = rearrange(video, "b f c h w -> (b f) c h w")                 # (B*F, C, h, w)
        x = torch.randn(2, 3, 32)
        shapetrace.name(x, "B T D")
        heads = rearrange(x, "b t (h d) -> b h t d", h=4)                 # (B, H, T, d_k)
    return t, out, heads


def test_a_patterns_h_on_an_axis_it_passed_through_whole_and_unnamed_is_not_named_heads():
    """On f946d52 (main) Latte's latent height, passed through whole by ``'b f c h w -> (b f) c h w'``, was named
    ``H`` (heads) by the letter ``h`` and its size 4 = H alone: a false name. Heads cut from named features by a
    pattern's ``(h d)`` are still named."""
    t, _, _ = _video_fold()
    fold, split = t.events[0].outputs[0].dims, t.events[-1].outputs[0].dims
    assert "H" not in fold
    assert split[:2] == ("B", "H")
