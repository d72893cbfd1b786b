"""explain_failure: the axes named in the explanation come from the failed event's operands."""

from __future__ import annotations

import pytest
import torch

import shapetrace
from shapetrace.failure import explain_failure, merge_groups, target_shape


def failed(fn, dims="B=2 T=6 D=512 H=8"):
    with pytest.raises(RuntimeError) as info:
        with shapetrace.trace(dims=dims) as t:
            fn()
    event = t.events[-1]
    assert event.error and event.error.startswith("RuntimeError")
    return event, info.value


def test_view_with_minus_one_names_the_axes_that_cannot_merge():
    y = torch.zeros(2, 8, 6, 64)
    event, _ = failed(lambda: shapetrace.name(y, "B H T d_k").transpose(1, 2).view(2, 6, -1))
    assert target_shape(event) == [2, 6, 512]
    text = explain_failure(event)
    assert text.startswith("view cannot merge H and d_k into one axis: H steps 384 elements but d_k "
                           "(64 entries) steps 1")
    assert "In memory the axes run in the order [B, H, T, d_k]" in text
    assert "1. .contiguous().view(...)" in text and "2. .reshape(...)" in text


def test_linear_with_the_wrong_width():
    layer = torch.nn.Linear(512, 512)
    event, exc = failed(lambda: layer(shapetrace.name(torch.zeros(2, 6, 8, 64), "B T H d_k")))
    assert "mat1 and mat2 shapes cannot be multiplied (96x64 and 512x512)" in str(exc)
    assert explain_failure(event).startswith(
        "linear multiplies the last axis of its input by the weight: the layer expects 512 input "
        "features, but the input's last axis is d_k=64.")


def test_merge_groups():
    assert merge_groups((2, 6, 8, 64), (2, 6, 512)) == [[2, 3]]
    assert merge_groups((2, 8, 6, 64), (2, 48, 64)) == [[1, 2]]
    assert merge_groups((2, 6, 512), (2, 6, 8, 64)) == []
