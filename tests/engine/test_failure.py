"""explain_failure: the axes named in the explanation come from the failed event's operands."""

from __future__ import annotations

import pytest
import torch

import shapetrace
from shapetrace.engine.failure import explain_failure


def failed(fn, dims="B=2 T=6 D=512 H=8"):
    with pytest.raises(RuntimeError) as info:
        with shapetrace.trace(dims=dims) as t:
            fn()
    event = t.events[-1]
    assert event.error and event.error.startswith("RuntimeError")
    return event, info.value


def test_view_with_minus_one_names_the_axes_that_cannot_merge():
    """The same explanation as ``shapetrace strides`` (viewfail), with -1 resolved by torch's rule."""
    y = torch.zeros(2, 8, 6, 64)
    event, _ = failed(lambda: shapetrace.name(y, "B H T d_k").transpose(1, 2).view(2, 6, -1))
    text = explain_failure(event)
    assert text.startswith("view(2, 6, 512) has to merge H and d_k (8 × 64 = 512 elements)")
    assert "H → d_k: stride(H) = 384, but size(d_k) × stride(d_k) = 64 × 1 = 64" in text
    assert "fix 1: .contiguous().view(2, 6, 512)  copies 24 KiB (6,144 elements)" in text
    assert "fix 2: .reshape(2, 6, 512)  makes the same 24 KiB copy, silently" in text


def test_linear_with_the_wrong_width():
    layer = torch.nn.Linear(512, 512)
    event, exc = failed(lambda: layer(shapetrace.name(torch.zeros(2, 6, 8, 64), "B T H d_k")))
    assert "mat1 and mat2 shapes cannot be multiplied (96x64 and 512x512)" in str(exc)
    assert explain_failure(event).startswith(
        "linear multiplies the last axis of its input by the weight: the layer expects 512 input "
        "features, but the input's last axis is d_k=64.")
