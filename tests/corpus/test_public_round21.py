"""A twenty-first round of public-style files (tests/corpus/public21: mistral-inference's rolling-buffer
sliding-window cache, Jais's ALiBi with muP scaling, YaRN's scaled rotary, MPNet's relative position buckets,
Hunyuan-Large's cross-layer key/value sharing with QK-norm, StreamingLLM's attention sinks with re-based
positions), traced at distinct sizes and at B = T = H = 4, first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | equal sizes) on 6d420fd + the files,
and the CLI (``shapetrace trace FILE [bug] --dims DIMS``, dependency contracts measured) at the first DIMS:

=============== =========================== ============================== ======================= ===============
file            variant                     distinct (DIMS)                equal sizes             CLI
=============== =========================== ============================== ======================= ===============
mistral_rolling (correct)                   ? 34 of 53 (scatter_ cache)    ? 23 of 44              ? 34 of 53
mistral_rolling window-band-upper           ?                              ✗ causal-mask-reversed  ✗ causal-mask-
                                                                                                   leaks
mistral_rolling decode-softmax-over-queries ?                              ?                       ?
jais_alibi      (correct)                   ? 24 of 25 (expand to H)       ? 2 of 25               ? 24 of 25
jais_alibi      alibi-sign-reversed         ✗ distance-bias-reversed       ✗ (same)                ✗ (same)
jais_alibi      merge-without-permute       ✗ mixed-axis                   ✗ tokens-merged-with-   ✗ mixed-axis
                                                                           features
yarn_rope       (correct)                   ✓                              ? 15 of 32              ✓
yarn_rope       rotate-half-unsigned        ? 26 of 32                     ?                       ?
yarn_rope       positions-from-batch        raises (untraced)              ✗ broadcast-mismatch x2 ✗ raised
mpnet_relbucket (correct)                   ✓                              ? 0 of 26               ✓
mpnet_relbucket padding-mask-on-queries     ✗ mask-wrong-axis              ✗ (same)                ✗ (same)
mpnet_relbucket bias-permute-keys-first     ? (permute of two T axes)      ?                       ?
hunyuan_cla     (correct)                   ✓                              ? 20 of 64              ✓
hunyuan_cla     qk-norm-over-tokens         ! normalised-over-tokens,      ?                       ✗ causal-mask-
                                            pooled-over-padding                                    leaks (+ the 2)
hunyuan_cla     cla-values-as-keys          ✓ (missed)                     ✓ (missed)              ✓ (missed)
streaming_sinks (correct)                   ? 39 of 42 (1-row rotary)      ? 22 of 36              ? 39 of 42
streaming_sinks evict-along-heads           ?                              ? (no eviction at T=4)  ?
streaming_sinks recent-from-the-start       ?                              ? (no eviction at T=4)  ?
=============== =========================== ============================== ======================= ===============

At distinct sizes (``round_outcome``) the 6 correct files were ✓ 3, ? 3, ✗ 0; the 12 bugs ✗ 3, ! 1, ? 6, ✓ 1
(Hunyuan's cross-layer pair read back as value, key), 1 raising untraced. The CLI: correct ✓ 3, ? 3; bugs ✗ 5
(4 findings, 1 raised), ? 6, ✓ 1.

The fix (one general mechanism):

* ``rules/weighted_values.keys_and_values_swapped``: weights over the keys whose scores took the value
  projection's output as their keys, multiplying the key projection's output, is ``key-value-swapped`` (the
  projections read from the modules they ran in, never from sizes; keys tied to values, or either half alone,
  stay silent; test in tests/engine/test_weighted_values.py). Hunyuan's ``cla-values-as-keys`` ✓ -> ✗, also at
  equal sizes and in the CLI.

Now (``round_outcome``, distinct): correct ✓ 3, ? 3, ✗ 0; bugs ✗ 4, ! 1, ? 6, ✓ 0, 1 raising. What stays
``?`` and why: Mistral (the rolling buffer is a zeros buffer written by ``scatter_`` at ``positions % W``, and the
decode step reads all of it: the cache's slots and the scores' keys of the decode step are unnamed, so the
decode softmax over its one query is not read as over an axis of one entry beside the keys; the banded mask
with its two calls swapped hides keys only past ``W`` ahead at T = 6, W = 4, which the mask rules read as a
look-ahead window or a causal mask off its diagonal, and cannot tell apart), Jais (ALiBi's distances
``expand``-ed to the heads by an int: an axis of 4 that only its size would name, left unnamed), YaRN's
unsigned ``rotate_half`` (halves swapped without the sign are no rotation the engine recognises, so the halves
are left unnamed rather than guessed), MPNet's bias permuted keys-first (two axes both named T moved past
each other: names cannot tell which is which), StreamingLLM (the query's one-row rotary table is computed, not
cut from an entered table, and has no axis a use proves; the evictions along the heads and from the start are
value-level: the heads' slice ``[5:8]`` of 4 heads is empty and the ``cat`` keeps every head and every token).

Since round 22 (engine/infer/backward: a name carried back through an elementwise op of several tensors reaches
every operand broadcasting lines up there), Jais's correct file reads ``✓`` at distinct sizes: the distances'
``expand(num_heads, -1, -1)`` is multiplied by the slopes ``[:, None, None]``, whose axis is ``H``.

Round 25 (``directions.whole_past_hidden``: a mask hiding every earlier key while a query sees a later one is
a causal pattern mirrored): mistral_rolling ``window-band-upper``
is ``✗ causal-mask-reversed`` at distinct sizes too (was ``?``).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public21 import (
    hunyuan_cla,
    jais_alibi,
    mistral_rolling,
    mpnet_relbucket,
    streaming_sinks,
    yarn_rope,
)

MODULES = (mistral_rolling, jais_alibi, yarn_rope, mpnet_relbucket, hunyuan_cla, streaming_sinks)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (mistral_rolling, ""): [UNSURE, UNSURE],
    (mistral_rolling, "window-band-upper"): [("✗", ("causal-mask-reversed",))] * 2,
    (mistral_rolling, "decode-softmax-over-queries"): [UNSURE, UNSURE],
    (jais_alibi, ""): [OK, UNSURE],   # (r22: ALiBi's expand to the heads is lined up with the slopes' H by ``*``)
    (jais_alibi, "alibi-sign-reversed"): [("✗", ("distance-bias-reversed",))] * 2,
    (jais_alibi, "merge-without-permute"): [("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",))],
    (yarn_rope, ""): [OK, UNSURE],
    (yarn_rope, "rotate-half-unsigned"): [UNSURE, UNSURE],
    (yarn_rope, "positions-from-batch"): [("raises", ()), ("✗", ("broadcast-mismatch", "broadcast-mismatch"))],
    (mpnet_relbucket, ""): [OK, UNSURE],
    (mpnet_relbucket, "padding-mask-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
    (mpnet_relbucket, "bias-permute-keys-first"): [UNSURE, UNSURE],
    (hunyuan_cla, ""): [OK, UNSURE],
    (hunyuan_cla, "qk-norm-over-tokens"): [("!", ("normalised-over-tokens", "pooled-over-padding")), UNSURE],
    (hunyuan_cla, "cla-values-as-keys"): [("✗", ("key-value-swapped",))] * 2,
    (streaming_sinks, ""): [UNSURE, UNSURE],
    (streaming_sinks, "evict-along-heads"): [UNSURE, UNSURE],
    (streaming_sinks, "recent-from-the-start"): [UNSURE, UNSURE],
}

#: the rows also traced at equal sizes (the suite's time is a budget: the others' equal-size outcomes are the
#: table above, measured once): the one the fix changed there, and the one that raises at distinct sizes
EQUAL_TESTED = {(hunyuan_cla, "cla-values-as-keys"), (yarn_rope, "positions-from-batch")}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
