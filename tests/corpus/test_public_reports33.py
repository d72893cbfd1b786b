"""A thirty-third round of files after public bug reports (tests/corpus/reports33; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED``, at equal sizes too (B = T = H = 4, or
the module's own ``EQUAL`` reading; the other rows' equal-size outcomes were measured once and are kept in the
table: the suite's time is a budget). First sight recorded on b074003 (main at 6527aa1 plus the round's files).

* swiftformer_additive_softmax — Amshaker/SwiftFormer issue #4: ``EfficientAdditiveAttnetion``'s per-token
  scores ``query @ w_g`` ``(B, N, 1)`` softmaxed over their one-entry last axis (every weight 1) instead of over
  the tokens; the twin is the reporter's ``softmax(dim=1)``;
* audio_flamingo_rotary_order — NVIDIA/audio-flamingo issue #27: the audio encoder's rotary embedding applied to
  ``(B, T, H, d_k)`` before the transpose, so ``apply_rotary_pos_emb`` read the heads as the sequence;
* gemma3_cache_end_index — google-deepmind/gemma pull request #765: Gemma 3's decode step wrote every batch
  row's keys and values into the cache at ``end_index[0]`` instead of each row's own ``end_index``;
* molecule_vae_batch_first — DaoyuanLi2816/Molecule-Generator pull request #22: the VAE's
  ``nn.TransformerEncoderLayer`` built without ``batch_first=True`` for ``(batch, seq, embed)`` input, and the
  pads never masked (``src_key_padding_mask``).

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also measures the dependency contracts, in the last column).

============================  =========================  ===============================  ============================
file                          variant                    round_outcome b074003            CLI on b074003
============================  =========================  ===============================  ============================
swiftformer_additive_softmax  (correct)                  ? / ?  (18 of 20: expand,        ? 19 of 20 (#24 conv2d)
                                                         conv2d)
swiftformer_additive_softmax  softmax-last-axis          ? / ?  (the same)                ? 19 of 20
swiftformer_additive_softmax  softmax-over-tokens (twin) ? / ?  (the same)                ? 19 of 20
audio_flamingo_rotary_order   (correct)                  ✓ / ?                            ✓ all 38 (batch apart, tokens,
                                                                                          padding unread held)
audio_flamingo_rotary_order   rotary-before-transpose    ✗ broadcast-mismatch,            ✗ (the same two)
                                                         rotary-same-angle-every-token /
                                                         ✗ broadcast-mismatch
gemma3_cache_end_index        (correct)                  ? / ?  (1 of 22)                 ? 2 of 26
gemma3_cache_end_index        shared-end-index           ? / ?  (2 of 21)                 ? 3 of 25
molecule_vae_batch_first      (correct)                  ? / ?  (34 of 39)                ? 34 of 39
molecule_vae_batch_first      sequence-first-layers      ✗ attends-over-batch / ?         ✗ attends-over-batch
molecule_vae_batch_first      pads-unmasked              ? / ?  (33 of 35)                ? 33 of 35
============================  =========================  ===============================  ============================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 1, ? 3, ✗ 0 (the twin ?); the 5 bugs ✗ 2, ? 3,
✓ 0 (the CLI the same).

Fixed (each engine test fails on 6527aa1):

* engine/rules/weights (with engine/ops ``is_projection``): a softmax whose input a matrix product by module
  parameters made (SwiftFormer's ``query @ w_g``, one score per token) is no q·kᵀ product: its output axis is a
  projection's, which no product rule judges, so the one-entry check now reads it: ``softmax-last-axis`` is
  ``✗ softmax-over-one-entry`` at both sizes (tests/engine/test_weights.py
  ``test_weights_over_a_projection_of_one_column_are_an_error``; its ``dim=1`` twin stays silent).
* engine/sites ``einops_call`` + engine/infer/einops: einops caches a recipe by value, so after an untraced
  run (a warm-up; ``round_outcome``'s own untraced check) ``repeat(G, 'b d -> b repeat d', repeat=key.shape[1])``
  hands ``expand`` a plain 24 and the grown axis lost its name; the pattern's length argument, read in the
  einops frame, still holds the size read from ``key``'s axis, and names it (tests/engine/test_infer_einops.py
  ``test_a_pattern_axis_of_a_size_read_from_an_axis_takes_that_axis_once_einops_cached_the_recipe``):
  SwiftFormer's correct file and its twin are ``? 19 of 20`` (the conv MLP below).

After the round (this module): correct ✓ 1, ? 3, ✗ 0 (the twin ?); bugs ✗ 3, ? 2, ✓ 0.

Open (why each stays ``?``):

* swiftformer_additive_softmax (correct, twin): the conv MLP's ``Conv2d(D, 4·D, 1)`` makes 128 channels no name
  has (``linear`` names such a width ``F``; ``conv_axes`` names a conv's channels only by a declared width). Tried:
  naming them ``F`` from named features as ``linear`` does; reverted, since ``F`` then went to the first conv's
  width in three earlier files (public37 stable_audio_dit from 67 to 16 of 72 checked: its MLP's own ``F`` lost
  its name; public43 pct_offset_attention, public24 nonlocal_block): one projected width per trace is a
  limit of ``F`` itself, not of convs.

* gemma3_cache_end_index (both): the projections are einsums by 3-d parameters (``'BTD,NDH->BTNH'``) and the cache
  ``(B, S, K, H)`` enters unnamed (``K`` key heads undeclared), so heads, head width and slots have no names and
  the write ``k_cache[batch_indices, slots] = ...`` is not read against the batch. Seeing ``shared-end-index``
  needs the cache's slot axis named and a rule that a batch's rows are written at each row's own index (the
  code's ``end_index[0]`` is one row's value used for all): not tried in this round.
* molecule_vae_batch_first (correct, ``pads-unmasked``): inside ``nn.MultiheadAttention`` torch grows the key
  padding mask over the heads with a literal ``num_heads`` (``expand(-1, num_heads, -1, -1)``), an axis of
  copies no read size names, and the latent ``Linear(D, 8)`` has d_k's width (8 = 32 / 4: equal sizes never
  decide a name). Whether the pads were read is a dependency contract; the CLI does not measure it here (the
  token ids turn into floats along several paths). At B = T = H = 4 nothing is named, so
  ``sequence-first-layers`` is ``?`` there (the finding is kept out: it rests on the order of equal sizes).
* audio_flamingo_rotary_order (correct) at equal sizes: names found from sizes alone are ambiguous (``?``); its
  bug stays ``✗ broadcast-mismatch`` there (the table's T-rows line up with the heads whatever the reading).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports33 import (
    audio_flamingo_rotary_order,
    gemma3_cache_end_index,
    molecule_vae_batch_first,
    swiftformer_additive_softmax,
)

MODULES = (swiftformer_additive_softmax, audio_flamingo_rotary_order, gemma3_cache_end_index,
           molecule_vae_batch_first)
UNSURE, SURE = ("?", ()), ("✓", ())
ONE_ENTRY = ("✗", ("softmax-over-one-entry",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (swiftformer_additive_softmax, ""): [UNSURE, UNSURE],
    (swiftformer_additive_softmax, "softmax-last-axis"): [ONE_ENTRY, ONE_ENTRY],
    (swiftformer_additive_softmax, "softmax-over-tokens"): [UNSURE, UNSURE],
    (audio_flamingo_rotary_order, ""): [SURE, UNSURE],
    (audio_flamingo_rotary_order, "rotary-before-transpose"): [
        ("✗", ("broadcast-mismatch", "rotary-same-angle-every-token")), ("✗", ("broadcast-mismatch",))],
    (gemma3_cache_end_index, ""): [UNSURE, UNSURE],
    (gemma3_cache_end_index, "shared-end-index"): [UNSURE, UNSURE],
    (molecule_vae_batch_first, ""): [UNSURE, UNSURE],
    (molecule_vae_batch_first, "sequence-first-layers"): [("✗", ("attends-over-batch",)), UNSURE],
    (molecule_vae_batch_first, "pads-unmasked"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(swiftformer_additive_softmax, "softmax-last-axis")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
