"""The op registry (shapetrace/engine/ops.py): an op is identified by its function, not by its name.

``torch.nn.functional.unfold`` (im2col: every sliding block copied into a column) and ``Tensor.unfold``
(windows along one axis: a view of the same storage) share the ``__name__`` "unfold". Style of the
im2col patch embeddings of public vision code (timm's ``PatchEmbed`` alternatives, the "unfold then
linear" patch stems in lucidrains/vit-pytorch's simple variants) and of the sliding-window code that
uses ``Tensor.unfold`` (Longformer-style chunking in transformers).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import shapetrace
from shapetrace.engine.ops import BY_CALLABLE, REGISTRY, spec_for
from shapetrace.engine.sentences import annotate


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _patches_then_windows(x: torch.Tensor):
    B, C, Hh, W = x.shape                                                  # (B, C, H, W)
    cols = F.unfold(x, kernel_size=2, stride=2)                           # (B, C·2·2, H/2·W/2)
    rows = x.unfold(3, 2, 2)                                              # (B, C, H, W/2, 2)
    return cols, rows


def test_f_unfold_is_a_copy_with_its_own_sentence_and_tensor_unfold_a_view():
    x = torch.randn(2, 3, 4, 4)
    with shapetrace.trace() as t:
        cols, rows = _patches_then_windows(x)
    assert not _shares_storage(cols, x) and _shares_storage(rows, x)   # what torch says
    im2col, windows = t.events
    assert (im2col.op, im2col.view, im2col.copy_bytes) == ("F.unfold", False, cols.numel() * 4)
    assert (windows.op, windows.view, windows.copy_bytes) == ("unfold", True, 0)
    assert (im2col.output.shape, im2col.output.stride) == (tuple(cols.shape), cols.stride())
    assert (windows.output.shape, windows.output.stride) == (tuple(rows.shape), rows.stride())
    assert annotate(im2col).startswith("copies each sliding block of the input into one column (im2col)")
    assert annotate(windows).startswith("windows along an axis (overlapping ones share memory)")
    assert spec_for("F.unfold").names is None          # no name rule of windows is applied to im2col
    assert spec_for("unfold").memory == "view"


def test_every_op_known_by_its_function_resolves_and_has_a_unique_name():
    import importlib

    for spec in BY_CALLABLE:
        owner, _, name = spec.callable.rpartition(".")
        assert callable(getattr(importlib.import_module(owner), name))
        assert REGISTRY[spec.name].callable == spec.callable
        assert getattr(getattr(importlib.import_module(owner), name), "__name__", None) != spec.name
