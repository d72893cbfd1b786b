"""engine/picks.py, and the names of what is written back by index (``scatter``): Mixture-of-Depths routing,
after 0-5788719150923125/praxis ``PraxisMixtureOfDepths`` (the round file is
tests/corpus/public50/mod_router_gather.py). Each test fails on 243f502 (noted per test)."""

import pytest
import torch
import torch.nn.functional as F

import shapetrace
from shapetrace.engine.picks import NotHeld, Picks


def test_picks_recorded_are_held_in_a_second_run_with_their_values_read_again_where_held():
    """Before: no engine/picks.py. topk's indices are the recorded ones, its values the input's there."""
    x = torch.tensor([[0.1, 0.9, 0.5, 0.3]])
    with Picks() as made:
        torch.topk(x, 2, dim=1)
    assert [(f.__name__, [p.tolist() for p in picks]) for f, picks in made.recorded] == [("topk", [[[1, 2]]])]
    moved = torch.tensor([[0.1, 0.2, 0.5, 0.8]])                    # (1, 4): the picks become 3 and 2
    with Picks(made.recorded) as kept:
        values, indices = torch.topk(moved, 2, dim=1)
    assert indices.tolist() == [[1, 2]] and values[0].tolist() == pytest.approx([0.2, 0.5])
    assert kept.moved == ["topk"]


def test_a_reduced_pick_is_read_again_without_its_axis_and_a_comparison_is_held_whole():
    """``max(x, dim)`` drops the axis (keepdim False); ``x > 0`` is a pick made by value too. Before: no picks."""
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    with Picks() as made:
        x.max(dim=1)
        torch.gt(x, 0)
    other = torch.tensor([[9.0, -2.0, 3.0], [4.0, 5.0, 6.0]])
    with Picks(made.recorded) as kept:
        best = other.max(dim=1)
        positive = torch.gt(other, 0)
    assert best.indices.tolist() == [2, 1] and best.values.tolist() == [3.0, 5.0]
    assert positive.tolist() == [[True, False, True], [True, True, False]]
    assert kept.moved == ["max", "gt"]


def test_integers_picked_from_integers_are_data_not_picks_and_a_changed_run_is_not_held():
    """Positions from ``arange`` compared with each other are no pick (nothing by value); a replay that calls
    another op than the recording cannot hold the picks. Before: no picks."""
    with Picks() as made:
        torch.gt(torch.arange(4), 1)
        torch.sort(torch.tensor([3, 1, 2]))
    assert made.recorded == []
    with Picks() as made:
        torch.topk(torch.randn(5), 2)
    with pytest.raises(NotHeld), Picks(made.recorded):
        torch.randn(5).argmax()


def test_a_scatter_out_of_place_keeps_its_input_names_and_picks_by_value_stay_unnamed():
    """``torch.scatter`` writes the picked tokens back into a copy of its input: the copy is the input's axes.
    ``topk``'s picks carry no name (what they pick is decided by value: naming them put ``✓`` on value-level bugs
    of the corpus, public22's farthest neighbours and public41's region grid). Before: ``scatter`` had no
    registry entry and its output ``[2, 8, 32]`` no names."""
    x = torch.randn(2, 8, 32)                                               # (B, T, D)
    router = torch.randn(1, 32)
    with shapetrace.trace(dims="B=2 T=8 D=32 H=4") as t:
        logits = F.linear(x, router)                                        # (B, T, 1)
        _, picked = torch.topk(logits, 4, dim=1)                            # (B, k, 1)
        index = picked.expand(-1, -1, x.size(2))                            # (B, k, D)
        chosen = torch.gather(x, 1, index)                                  # (B, T[index], D)
        torch.scatter(x, 1, index, chosen * 2)                              # (B, T, D)
    rows = {e.op: e for e in t.events}
    assert rows["expand"].inputs[0].dims == (None, None, None)
    assert rows["gather"].output.dims == ("B", "T[index]", "D")
    assert rows["scatter"].output.dims == ("B", "T", "D") and rows["scatter"].output.shape == (2, 8, 32)
