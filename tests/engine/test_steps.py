"""shapetrace/engine/rules/steps.py: a decoding step's mask that hides the step's own key (the newest of the
cached keys joined with its own), read at the mask's call (directions.hidden_side: ``hides_newest``).

Fails on 8110233: tinygrad PR #15949's unshifted ``ones(T, P + T).tril()`` at a step
(tests/corpus/reports2/cached_causal_tril) was ``? checked 36 of 38 ops``, no finding."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import shapetrace
from shapetrace.engine.directions import hidden_side
from tests.corpus.helpers import traced_build
from tests.corpus.reports2 import cached_causal_tril


def _errors(t):
    return [(d.kind, d.message) for d in t.diagnostics if d.severity == "error"]


def test_one_querys_mask_read_for_its_newest_key():
    hides_last = torch.zeros(1, 7, dtype=torch.bool)
    hides_last[0, 1:] = True                                      # tril() of [1, 7]: keeps key 0 alone
    assert hidden_side(hides_last, (2, 4, 1, 7)) == {"hides_side": "other", "hides_newest": True}
    assert hidden_side(~hides_last, (2, 4, 1, 7)) == {"hides_side": "other"}
    assert hidden_side(torch.zeros(1, 7, dtype=torch.bool), (2, 4, 1, 7)) == {"hides_side": "other"}


def test_the_unshifted_tril_at_a_cached_step_hides_the_step_from_itself():
    t = traced_build(cached_causal_tril, "tril-no-offset", cached_causal_tril.DIMS[0])
    [(kind, message)] = _errors(t)
    assert kind == "causal-mask-hides-itself"
    assert message.startswith("masked_fill #33 hides, from the one query of the scores [B=2, H=4, 1, T+1=7], its "
                              "newest key, the last of T+1: cat #25 put the step's own key there, after 6 cached "
                              "ones, so the step does not attend to itself ([1, T+1=7];")   # ([1, 7] until 13c0e98)
    assert _errors(traced_build(cached_causal_tril, "", cached_causal_tril.DIMS[0])) == []


def test_a_cross_attention_step_hiding_padded_source_frames_is_not_judged():
    """The keys are the encoder's frames (no join of a cache with the step's key): a padding mask that hides
    the last frames from the step's query is no step hiding itself."""
    torch.manual_seed(0)
    x, memory = torch.randn(2, 1, 32), torch.randn(2, 7, 32)
    padding = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    padding[:, :, :, 5:] = True                                    # both sources end in two padding frames
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 S=7 D=32 H=4") as t:
        q = x.view(2, 1, 4, 8).transpose(1, 2)                     # (B, H, 1, d_k)
        k = memory.view(2, 7, 4, 8).transpose(1, 2)                # (B, H, S, d_k)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(padding, float("-inf"))
        F.softmax(scores, dim=-1) @ k
    assert t.events[-3].params.get("hides_newest") is True
    assert _errors(t) == []
