"""shapetrace/engine/rules/key_sequences.py: one attention whose keys hold one sequence at one call and another
at a later call.

Whisper's cross-attention handed the self-attention's tuple cache at the decoding step
(tests/corpus/public12/whisper_cross_cache.py, ``past_key_value[:2]`` for ``[-2:]``): on 1123aec (main before
round 12) it read "? checked 44 of 67" (the step unnamed), and with the step seeded (infer/seeds) it would have
been ``✓``; now it is a ``keys-change-sequence`` warning. The correct file (S at both calls of the cross-attention,
T then T+1 for the self-attention's cache) stays silent."""

from __future__ import annotations

from tests.corpus.helpers import findings, traced_build, verdict_line
from tests.corpus.public12 import whisper_cross_cache

DIMS = "B=2 T=6 S=10 D=64 H=4"


def test_a_cross_attention_handed_the_decoders_cache_is_a_warning():
    t = traced_build(whisper_cross_cache, "cross-reads-self-cache", DIMS)
    # (lib14: the cross-attention's own k/v projections of the encoder's states, dropped for the cache, are
    # projection-bypassed too)
    assert findings(t) == ("projection-bypassed", "projection-bypassed", "keys-change-sequence")
    d = next(d for d in t.diagnostics if d.kind == "keys-change-sequence")
    assert (d.severity, d.event) == ("warning", 71)
    assert d.message == (
        "matmul #71 (tests/corpus/public12/whisper_cross_cache.py:50 in layer.encoder_attn) makes scores "
        "[B=2, H=4, 1, T=6] over keys of T, but the same line made [B=2, H=4, T=6, S=10] over keys of S at #37: one "
        "attention reads two sequences (a cross-attention handed the decoder's own cache, or one module shared on "
        "purpose).")
    assert verdict_line(t).startswith("! no errors, 3 warnings; checked 67 of 67 ops")


def test_a_cache_that_grows_the_same_sequence_is_silent():
    t = traced_build(whisper_cross_cache, "", DIMS)
    assert [d.kind for d in t.diagnostics] == []


T5_DIMS = "B=2 T=6 S=8 D=32 H=4"


def test_a_relative_position_bias_across_two_sequences_is_a_warning():
    """huggingface/transformers PR #8518 (tests/corpus/reports5/t5_cross_position_bias.py): the cross-attention
    given T5's relative-position bias between decoder places (T) and encoder places (S). Fails on 29918bb (no
    finding: a false ``✓``)."""
    from tests.corpus.reports5 import t5_cross_position_bias

    t = traced_build(t5_cross_position_bias, "cross-bias", T5_DIMS)
    assert findings(t) == ("positions-across-sequences",)
    d = t.diagnostics[0]
    assert (d.severity, d.event) == ("warning", 44)
    assert d.message == (
        "embedding #44 reads a table at the index [T=6, S=8], laid over places of two sequences (T and S), and "
        "matmul #39 makes the cross-attention scores [B=2, H=4, T=6, S=8] between them: a bias read at the distance "
        "between a place of T and a place of S, which are not places of one sequence.")
    assert verdict_line(t).startswith("! no errors, 1 warning; checked 50 of 50 ops")


def test_a_self_attention_bias_beside_a_cross_attention_is_silent():
    """The correct block: the self-attention's bias over (T, T), the cross-attention without one."""
    from tests.corpus.reports5 import t5_cross_position_bias

    t = traced_build(t5_cross_position_bias, "", T5_DIMS)
    assert [d.kind for d in t.diagnostics] == []
