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
    assert findings(t) == ("keys-change-sequence",)
    d = next(d for d in t.diagnostics if d.kind == "keys-change-sequence")
    assert (d.severity, d.event) == ("warning", 71)
    assert d.message == (
        "matmul #71 (tests/corpus/public12/whisper_cross_cache.py:50 in layer.encoder_attn) makes scores "
        "[B=2, H=4, 1, T=6] over keys of T, but the same line made [B=2, H=4, T=6, S=10] over keys of S at #37: one "
        "attention reads two sequences (a cross-attention handed the decoder's own cache, or one module shared on "
        "purpose).")
    assert verdict_line(t).startswith("! no errors, 1 warning; checked 67 of 67 ops")


def test_a_cache_that_grows_the_same_sequence_is_silent():
    t = traced_build(whisper_cross_cache, "", DIMS)
    assert [d.kind for d in t.diagnostics] == []
