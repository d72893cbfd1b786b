"""shapetrace/engine/axis_reshape.py: names through ``view``/``reshape``.

A projection's own width ``F`` (lib13: :func:`shapetrace.engine.axis_compute.projected_width`) says nothing
of what its pieces hold: a view that cuts it (into heads, into q, k and v) gives unnamed pieces, as the
whole width was unnamed before it had a name (8110233). Merged with other axes and split again at its own
bounds it stays F."""

from __future__ import annotations

from shapetrace.engine.axes import root_axis
from shapetrace.engine.axis_reshape import reshape_axes
from shapetrace.engine.namer import Namer

NAMER = Namer({"B": 2, "T": 6, "D": 64, "H": 4})
B, T, F = root_axis("B", 2), root_axis("T", 6), root_axis("F", 96)


def _labels(axes) -> tuple:
    return tuple(NAMER.label(a) for a in axes)


def test_a_view_that_cuts_F_names_no_piece():
    """A q/k/v width no name has (DeepSeek's ``kv_b_proj``, 3 heads of 32) cut into (H', 32): what the
    pieces are is the question the view asks; F cannot answer it, so neither piece is named (on 8110233,
    which had no F, the pieces were F's: ``F/32``, ``F%32``)."""
    assert _labels(reshape_axes((B, T, F), (2, 6, 3, 32), NAMER)) == ("B", "T", None, None)


def test_F_merged_with_the_tokens_and_split_again_stays_F():
    """GPT-2's Conv1D: ``x.view(-1, x.size(-1))`` then ``addmm`` then ``view(B, T, F)`` (a guard: a whole F
    is not a piece, and keeps its name)."""
    merged = reshape_axes((B, T, F), (12, 96), NAMER)
    assert _labels(merged) == ("B*T", "F")
    assert _labels(reshape_axes(merged, (2, 6, 96), NAMER)) == ("B", "T", "F")


def test_a_mix_of_two_named_parts_is_named_whatever_the_unnamed_part():
    """``(T, ?, H)`` of 6 x 5 x 4 viewed ``(12, 10)``: axis 0 walks across tokens, an unnamed piece and heads,
    a mix whatever the unnamed piece is, so it is named by its named parts (``!T*H``: a finding can say so);
    axis 1 walks across heads and the unnamed piece only, one named part, and stays unnamed. On d04b913 both
    were unnamed (a mix with any unnamed part had no name: VOLO's output folded without its permute was ``?``)."""
    from shapetrace.engine.axes import unknown_axis

    H = root_axis("H", 4)
    assert _labels(reshape_axes((T, unknown_axis(5), H), (12, 10), NAMER)) == ("!T*H", None)
