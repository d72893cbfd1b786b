"""What is memoised for speed (issue 21) gives what computing afresh gives: argument text, labels after
the sequences are swapped, mixing verdicts."""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.engine import axes as ax
from shapetrace.engine import axis_reshape
from shapetrace.engine.namer import Namer


def _args(fn) -> list[str]:
    x = torch.zeros(2, 3, 4)
    with shapetrace.trace(dims="B=2 T=3 D=4") as t:
        fn(x)
    return [e.args for e in t.events]


def test_equal_frozen_arguments_that_print_differently_keep_their_own_text():
    assert _args(lambda x: (x.permute([0, 2, 1]), x.permute((0, 2, 1)), x.permute(0, 2, 1))) == \
        ["[0, 2, 1]", "(0, 2, 1)", "0, 2, 1"]
    assert _args(lambda x: (x.view(2, 12), x.view(2, 12), x.transpose(1, 2), x.transpose(1, 2))) == \
        ["2, 12", "2, 12", "1, 2", "1, 2"]


def test_labels_follow_a_swap_of_the_sequences_after_they_were_read():
    namer = Namer({"B": 2, "T": 5, "S": 5})
    axes = (ax.root_axis("B", 2), ax.root_axis("T", 5), ax.root_axis("S", 5))
    assert namer.dims_of(axes) == ("B", "T", "S")
    namer.swap_sequences()
    assert namer.dims_of(axes) == ("B", "S", "T")
    assert namer.label(axes[1]) == "S"


def test_the_mixing_verdict_of_an_axis_is_the_same_memoised():
    namer = Namer({"B": 2, "T": 6, "D": 512, "H": 8})
    mixed = axis_reshape.reshape_axes([ax.root_axis("B", 2), ax.root_axis("T", 6), ax.root_axis("D", 512)], [2, 8, 384],
                            namer)
    first = [namer.mix_kind(a) for a in mixed]
    assert first == [namer._mix_kind(a) for a in mixed] == [namer.mix_kind(a) for a in mixed]
    assert "error" in first
