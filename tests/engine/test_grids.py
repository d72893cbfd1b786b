"""engine/grids: ``torch.meshgrid`` names each grid axis after the vector it walks (``"ij"``: in the operands'
order; ``"xy"``: the first two swapped), so a 2-D position table built from ``arange``\\ s of a feature map's
sizes carries ``Wp*Hp`` (RT-DETR's and OmDet-Turbo's sin-cos table) and not an unnamed 15.

On 51f5266c (main) meshgrid had no entry: its grids, and everything built from them, were unnamed (reports34
omdet_ela_batch_first's position table: ``not checked (unnamed axes)``)."""

from __future__ import annotations

import torch

import shapetrace


def _flattened(indexing, named=True):
    x = torch.randn(2, 4, 3, 5)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=4 Hp=3 Wp=5") as t:
        shapetrace.name(x, "B D Hp Wp")
        _, _, h, w = x.shape
        if named:
            grid_w, grid_h = torch.arange(w), torch.arange(h)                  # (Wp,), (Hp,)
        else:
            grid_w, grid_h = torch.arange(5), torch.arange(3)                  # (5,), (3,): sizes not read
        a, b = torch.meshgrid(grid_w, grid_h, indexing=indexing)               # (Wp, Hp) / (Hp, Wp)
        a.flatten()
        b.flatten()
    return [e.outputs[0].dims for e in t.events if e.op == "flatten"]


def test_an_ij_grid_of_counted_sizes_walks_them_in_order():
    """Fails on 51f5266c: ``[(None,), (None,)]``."""
    assert _flattened("ij") == [("Wp*Hp",), ("Wp*Hp",)]


def test_an_xy_grid_swaps_its_first_two_axes():
    """Fails on 51f5266c: ``[(None,), (None,)]``. Flattened, ``(Hp, Wp)`` is the feature map's own token
    order: the tokens ``N`` that ``x.flatten(2)`` makes."""
    assert _flattened("xy") == [("N",), ("N",)]


def test_a_grid_of_vectors_of_no_read_size_stays_unnamed():
    """The control: literal sizes name nothing (equal sizes never decide a name)."""
    assert _flattened("ij", named=False) == [(None,), (None,)]
