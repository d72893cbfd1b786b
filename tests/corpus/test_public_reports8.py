"""An eighth round of files after public bug reports (tests/corpus/reports8; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on 9203fd5 before any fix.

* tinyllm_prefill_causal — Mikyx-1/TinyLLM issue #17, PR #18: the causal mask applied only ``if cache is None``,
  so the prefill, run with the (empty) caches attached, was scored unmasked;
* lmengine_causal_chunk — open-lm-engine/lm-engine PR #498: ``is_causal=True`` for a chunk of queries against
  cached keys (torch's top-left mask);
* m2m100_positions_past — huggingface/transformers issue #15736, PR #15751: positions made from
  ``inputs_embeds`` without ``past_key_values_length``, so each decoding step took the first position;
* rotary_offset_cache — lucidrains/rotary-embedding-torch issue #11: rotary frequencies memoised by length only,
  so a later decoding step reused the first step's offset;
* keras_cross_padding_mask — keras-team/keras-io PR #1046: the decoder's cross-attention masked its keys (the
  source's tokens) with the target's padding mask;
* xformers_causal_skipped — facebookresearch/xformers issue #103: the causal mask built only when an
  ``att_mask`` is passed; a twin here (what torch records is a bidirectional encoder's; ``causal=True`` is a
  Python attribute no op reads).

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "B=2 T=6 D=32 H=4"``, where it differs):

========================  ==========================  ===========================================  ==========
file                      variant                     first sight on 9203fd5 (DIMS / equal)        now
========================  ==========================  ===========================================  ==========
tinyllm_prefill_causal    (correct)                   ✓ 37 ops / ?; CLI ✗ causal-mask-leaks        ✓ / ?; CLI ✓
tinyllm_prefill_causal    mask-only-without-cache     ✓ 35 ops / ?; CLI ✗ causal-mask-leaks        ! / !; CLI ✗
lmengine_causal_chunk     (correct)                   ? 10 of 23 (the chunk's cat unnamed) / ?     ? / ?
lmengine_causal_chunk     is-causal-with-cache        ✗ causal-mask-misaligned / ✗                 ✗ / ✗
m2m100_positions_past     (correct)                   ? 49 of 55 (index_select of the table) / ?   ? / ?
m2m100_positions_past     positions-without-past      ? 49 of 55 / ?                               ? / ?
rotary_offset_cache       (correct)                   ? 66 of 70 (rotate_half's stack) / ?         ? / ?
rotary_offset_cache       offset-not-in-cache-key     ✗ rotary-position-off / ?                    ✗ / ?
keras_cross_padding_mask  (correct)                   ✓ 59 ops / ?; CLI ? 53 of 65                 ✓ / ?
keras_cross_padding_mask  target-mask-for-cross       ✓ 59 ops / ?; CLI ? 53 of 65                 ✓ / ? (open)
xformers_causal_skipped   (correct)                   ✓ 22 ops / ?                                 ✓ / ?
xformers_causal_skipped   causal-only-with-mask       ✓ 20 ops / ?                                 ? / ? (twin*)
========================  ==========================  ===========================================  ==========

At first sight, at DIMS, the 6 correct files were ✓ 3, ? 3, ✗ 0 (the CLI: ✓ 1, ? 4, ✗ 1: tinyllm's correct
file, its own last token misnumbered by the dependency probe); the 6 variants first counted bugs ✗ 2, ? 1, ✓ 3.
Now, the 5 bugs: ✗ 2, ! 1, ? 1, ✓ 1 (keras, below); the correct files ✓ 3, ? 3, ✗ 0 (the CLI: ✗ 0). The fixes:

* ``rules/cached_chunks`` (``cached-chunk-unmasked``, a warning): several new queries scored with no mask
  against keys joined onto a growing KV cache (a join fed by an earlier one or read first by a later one);
* ``dependencies``: an output whose tokens run on past the input's (``T+1``) is read at the input's last token.

Open: keras' ``target-mask-for-cross`` is ``✓`` at DIMS (an expected failure below): the target's padding mask
``[B, T]`` laid on the source's keys, which only provenance could tell apart (source and target have the same
length, so the bug is silent; both are ``T`` by --dims). m2m100's sinusoidal table is looked up with
``index_select`` on flattened position ids, which no rule names, so neither its positions nor the bug's are
checked (done on 2026-12-02: the step's positions are read where the trace counted them, the bug ``✗
positions-restart``, the correct file ``✓``; tests/engine/test_positions_restart.py); rotary_offset_cache's
``rotate_half`` on interleaved pairs (``stack(...).flatten(-2)``) stays unnamed.

(*) xformers' twin ``causal-only-with-mask`` is the reported bug itself, kept a twin because nothing recorded said
the module meant to be causal. Since b68a0b7 the engine reads what a module declares (shapetrace/engine/declared.py:
``self.causal = True`` on ``ScaledDotProduct``), so its unmasked self-attention over 6 queries is ``?`` (the note
``causal-declared-unmasked``) at both sizes (``✓`` before), and the CLI, which measures the dependency contracts,
says ``✗ causal-mask-leaks`` (output token 0 depends on token 5; the correct file: ``✓``, the causal mask holds).
The twin's earlier ``✓`` rested on the flag being unread, not on the code being right (the maintainer: "This was
pretty wrong").
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN
from tests.corpus.helpers import round_outcome, round_sizes, round_tests, traced_build
from tests.corpus.reports8 import (
    keras_cross_padding_mask,
    lmengine_causal_chunk,
    m2m100_positions_past,
    rotary_offset_cache,
    tinyllm_prefill_causal,
    xformers_causal_skipped,
)

MODULES = (tinyllm_prefill_causal, lmengine_causal_chunk, m2m100_positions_past, rotary_offset_cache,
           xformers_causal_skipped)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (tinyllm_prefill_causal, ""): [OK, UNSURE],
    (tinyllm_prefill_causal, "mask-only-without-cache"): [("!", ("cached-chunk-unmasked",))] * 2,   # (✓ ? at 9203fd5)
    (lmengine_causal_chunk, ""): [UNSURE, UNSURE],
    (lmengine_causal_chunk, "is-causal-with-cache"): [("✗", ("causal-mask-misaligned",))] * 2,
    (m2m100_positions_past, ""): [OK, UNSURE],   # (? -> ✓ on 2026-12-02)
    (m2m100_positions_past, "positions-without-past"): [("✗", ("positions-restart",)), UNSURE],   # (? -> ✗)
    (rotary_offset_cache, ""): [UNSURE, UNSURE],
    (rotary_offset_cache, "offset-not-in-cache-key"): [("✗", ("rotary-position-off",)), UNSURE],
    (xformers_causal_skipped, ""): [OK, UNSURE],
    (xformers_causal_skipped, "causal-only-with-mask"): [UNSURE, UNSURE],   # (the reported bug: causal=True, (*))
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)


def test_the_cross_attentions_correct_mask_is_checked():
    assert [round_outcome(keras_cross_padding_mask, "", d) for d in round_sizes(keras_cross_padding_mask)] == \
        [OK, UNSURE]


@pytest.mark.xfail(strict=True, reason="open: the target's padding mask on the source's keys (same length) is ✓")
def test_the_target_mask_on_the_cross_attention_is_no_check_mark():
    assert round_outcome(keras_cross_padding_mask, "target-mask-for-cross", keras_cross_padding_mask.DIMS[0])[0] != "✓"


def test_with_the_dependency_contracts_the_source_is_not_taken_for_the_decoders_tokens():
    """``shapetrace.trace(..., dependencies=True)`` on the correct file, called ``(src, src_mask, tgt, tgt_mask)``:
    the contracts move the first sequence's last token (the source's, padding in entry 0), and the decoder's
    output follows the target. Before (a4491fe): ``✗ token-ignores-itself`` on correct code (output token 5 of
    batch 0 does not change when source token 5 moves). Now the token contracts are not measured, and say why."""
    report = traced_build(keras_cross_padding_mask, "", keras_cross_padding_mask.DIMS[0], dependencies=True).report()
    assert [d.kind for d in report.diagnostics if d.severity == "error"] == [] and report.contracts == [BATCH]
    assert f"{OWN_TOKEN}, {CAUSAL} (tgt is a second sequence of the input's shape: which of the two the output's " \
           "tokens follow cannot be told)" in report.verdict.line


class _SelfAttention(nn.Module):
    """A causal self-attention called as ``attn(x, x)`` (the keys the same tensor as the queries), its twin
    called ``attn(x, x.clone())``: equal values are one sequence, so the contracts are measured in both."""

    def __init__(self, d=32):
        super().__init__()
        self.q, self.kv = nn.Linear(d, d), nn.Linear(d, 2 * d)

    def forward(self, x, memory):                                                     # (B, T, D), (B, T, D)
        k, v = self.kv(memory).chunk(2, dim=-1)                                       # (B, T, D) each
        return nn.functional.scaled_dot_product_attention(self.q(x), k, v, is_causal=True)   # (B, T, D)


@pytest.mark.parametrize("copy", [False, True])
def test_a_second_argument_equal_to_the_input_is_the_same_sequence(copy):
    torch.manual_seed(0)
    model, x = _SelfAttention().eval(), torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4", dependencies=True) as t:
        model(x, x.clone() if copy else x)
    assert t.report().contracts[:3] == [BATCH, OWN_TOKEN, CAUSAL]
