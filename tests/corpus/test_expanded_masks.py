"""A padding mask expanded to the scores' shape (``mask.expand_as(scores)``, DistilBERT's idiom,
tests/corpus/public9/distilbert.py) is read as the mask it was expanded from:

* the axes ``expand_as`` grows take the names of the other tensor's axes at their places, as ``expand``
  grown to sizes read from axes does (the correct file was ``?``: ``#13 expand_as`` unnamed);
* a mask varies only along the axes where it holds different elements: a stride-0 axis is broadcast, as a
  size-1 axis is, so ``view(bs, 1, q_length, 1).expand_as(scores)`` hides whole query rows
  (``mask-wrong-axis``), found from the layout at every size (it was ``?`` at B = T = H = 4 and at B = 1,
  and only the values' ``token-ignores-itself`` at distinct sizes).
"""

from __future__ import annotations

import pytest

from tests.corpus.helpers import findings, round_outcome, traced_build
from tests.corpus.public9 import distilbert

SIZES = ("B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4", "B=1 T=6 D=32 H=4")


@pytest.mark.parametrize("dims", [SIZES[0], SIZES[2]])
@pytest.mark.parametrize("twin", ["", "mask-broadcast"])
def test_distilbert_with_its_mask_expanded_or_broadcast_is_checked_whole(twin, dims):
    t = traced_build(distilbert, twin, dims)
    assert round_outcome(distilbert, twin, dims) == ("✓", ())
    mask = next(e for e in t.events if e.op == "masked_fill").inputs[1]
    batch = dims.split()[0].split("=")[1]
    want = ["B", "H", "T", "T"] if twin == "" else ["B", None, None, "T"]
    assert list(mask.dims) == want and mask.shape == ((int(batch), 4, 6, 6) if twin == "" else (int(batch), 1, 1, 6))


def test_distilbert_at_equal_sizes_is_not_proven():
    t = traced_build(distilbert, "", SIZES[1])
    assert findings(t) == ()
    assert t.report().verdict.line.startswith("? checked 0 of 19 ops that could carry a layout bug; not checked "
                                              "(unnamed axes)")


@pytest.mark.parametrize("dims", SIZES)
def test_a_padding_mask_expanded_along_the_queries_is_on_the_wrong_axis(dims):
    t = traced_build(distilbert, "mask-on-queries", dims)
    assert findings(t) == ("mask-wrong-axis",)
    (d,) = [d for d in t.diagnostics if d.severity == "error"]   # (at B = T = 4, the note ambiguous-sizes too)
    b = dims.split()[0].split("=")[1]
    t_ = dims.split()[1].split("=")[1]
    assert d.message.startswith(f"masked_fill #13 broadcasts the mask [B={b}, H=4, T={t_}, T={t_}] against the scores "
                                f"[B={b}, H=4, T={t_}, T={t_}]: its T axis lines up with the queries and it is "
                                "broadcast over the keys")
    assert d.fix == "A key-padding mask [B, T] goes to [B, 1, 1, T]: mask[:, None, None, :]."


@pytest.mark.parametrize("dims", [SIZES[0], SIZES[2]])
def test_the_heads_merged_without_the_transpose_stay_an_error(dims):
    assert round_outcome(distilbert, "unshape-no-transpose", dims) == ("✗", ("mixed-axis",))
