"""shapetrace.engine.rules.head_split: an einops pattern that calls an axis heads, or a grid's height, while it
holds pieces of the tokens (pattern_contradictions, moved here from rules/diagnose.py at stop 52)."""

from __future__ import annotations


def test_a_grid_cut_in_another_order_than_flattened_is_said_in_the_grids_words():
    """CvT (tests/corpus/public16/cvt_conv_proj.py, grid-h-w-swapped): ``rearrange(x, "b (h w) c -> b c h w",
    h=w, w=h)`` on tokens of a declared 3 x 5 grid. The error stays; on 5ba3c85 it said the pattern's ``h`` named
    heads and advised ``'b n (h d) -> b h n d'`` (the wrong fix for an image's height)."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.public16 import cvt_conv_proj

    t = traced_build(cvt_conv_proj, "grid-h-w-swapped", "B=2 D=32 H=4 Hp=3 Wp=5")
    found = [d for d in t.diagnostics if d.kind == "mixed-axis"]
    assert len(found) == 1 and found[0].severity == "error"
    assert "that axis holds pieces of the tokens that are neither the heads (H=4) nor the declared grid's rows " \
           "(Hp=3): the tokens were cut in another order than they were flattened in." in found[0].message
    assert found[0].fix.startswith("If h is the image's height, give the sizes in the order the tokens were "
                                   "flattened (h=Hp rows of Wp)")
