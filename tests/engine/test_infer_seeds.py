"""shapetrace/engine/infer/seeds.py: names for a tensor that enters the traced code, from the declared sizes.

A decoding step's input ``[B, 1, D]`` (one new token's features) is seeded ``[B, 1, D]``: on 1123aec (main before
round 12) no seed fitted it, so Whisper's decoding step (tests/corpus/public12/whisper_cross_cache.py) had every
op unnamed ("? checked 44 of 67 ops ... not checked (unnamed axes): #43 layer_norm, #44 linear, ...")."""

from __future__ import annotations

import torch

import shapetrace
from tests.corpus.helpers import traced_build, verdict_line
from tests.corpus.public12 import whisper_cross_cache


def test_one_tokens_features_are_seeded_batch_one_features():
    x = torch.randn(2, 1, 64)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        x.view(2, 1, 4, 16).transpose(1, 2)
    assert [e.outputs[0].dims for e in t.events] == [("B", None, "H", "d_k"), ("B", "H", None, "d_k")]


def test_whispers_decoding_step_is_named_and_checked():
    t = traced_build(whisper_cross_cache, "", "B=2 T=6 S=10 D=64 H=4")
    step = next(e for e in t.events if e.op == "layer_norm" and e.inputs[0].shape == (2, 1, 64))
    assert step.outputs[0].dims == ("B", None, "D")
    assert verdict_line(t).startswith("✓ checked all 67 ops that could carry a layout bug")
