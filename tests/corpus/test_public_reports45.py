"""A forty-fifth round of files after public bug reports about a video VAE's frame fold, a rotary offset taken
before the cache, a temporal transformer's fold and unfold, a padding mask's polarity and a left-padded cache
(tests/corpus/reports45; each file's docstring cites its report), traced at their DIMS and at equal sizes
(B = T = H = 4, or the file's ``EQUAL``). First sight recorded on the working tree (main, plus the round's files).

* opensora_plan_attnblock3d — PKU-YuanGroup/Open-Sora-Plan issue #171 (fix PR #172, ``AttnBlock3DFix``):
  ``reshape(b * t, c, h * w)`` from ``(b, c, t, h, w)`` without the time permute (``no-time-permute``);
  ``bmm(v, w_)`` without ``w_.permute(0, 2, 1)`` (``weights-not-permuted``);
* moeut_rope_cache_offset — RobertCsordas/moeut pull request #6: ``pos_offset`` from the inputs' lengths, before
  the cache is joined on (``offset-before-cache``: the decoded query rotated at position 0); the moeut mask (True =
  masked) handed to SDPA uninverted (``mask-not-inverted``);
* diffusers_temporal_out_reshape — huggingface/diffusers issue #5633 / pull request #5496: the input fold without
  ``permute(0, 3, 4, 2, 1)`` (``in-frames-not-permuted``); the output permuted ``(0, 3, 4, 2, 1)``
  (``out-permute-hw-swapped``); the reported ``reshape(..., channel, num_frames)`` (``REPORTED``, outputs equal to
  the fix: a mislabelled intermediate, tested apart below);
* translation_key_padding_polarity — mlwithme/TransformerTranslation issues #2 and #6 (the author: the code is
  right, the mask is True at the pads): the issues' proposed ``== False`` (``padding-polarity``); the merge
  ``view(tgt_len, bsz, embed_dim)`` without ``transpose(0, 1)`` (``merge-without-transpose``);
* xtransformers_left_pad_cache — lucidrains/x-transformers issue #187, items 3 and 1: the left padding handed to
  self-attention as ``context_mask`` and ignored (``left-pad-as-context-mask``); a top-left causal mask
  ``ones(i, j).triu(1)`` for the decoded token (``causal-top-left``).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
everywhere in this round; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, agrees at DIMS).

================================  ==========================  ==============================================
file                              variant                     round_outcome (DIMS / EQUAL)
================================  ==========================  ==============================================
opensora_plan_attnblock3d         (correct)                   ✓ / ✓
opensora_plan_attnblock3d         no-time-permute             ✗ mixed-axis (x3) / the same
opensora_plan_attnblock3d         weights-not-permuted        ✗ values-by-queries / the same
moeut_rope_cache_offset           (correct)                   ? / ?   (65 of 69: two ``narrow``, two slices)
moeut_rope_cache_offset           offset-before-cache         ? / ?
moeut_rope_cache_offset           mask-not-inverted           ✗ mask-polarity, causal-mask-reversed / ✗ mask-p.
diffusers_temporal_out_reshape    (correct)                   ! tokens-merged-with-features / the same
diffusers_temporal_out_reshape    in-frames-not-permuted      ✗ mixed-axis / ✗ mixed-axis, broadcast-mismatch
diffusers_temporal_out_reshape    out-permute-hw-swapped      ✗ mixed-axis, t-m-w-f / ✗ broadcast-mismatch, t-m-w-f
diffusers_temporal_out_reshape    reported-reshape (apart)    ✗ mixed-axis, t-m-w-f / ! t-m-w-f
translation_key_padding_polarity  (correct)                   ✓ / ?
translation_key_padding_polarity  padding-polarity            **✓** / ?
translation_key_padding_polarity  merge-without-transpose     ✗ mixed-axis / ✗ broadcast-mismatch
xtransformers_left_pad_cache      (correct)                   ? / ?   (all 44 checked; lengths-unmeasured)
xtransformers_left_pad_cache      left-pad-as-context-mask    ? / ?
xtransformers_left_pad_cache      causal-top-left             ✗ mask-polarity / the same
================================  ==========================  ==============================================

One bug gets ``✓`` (named in ``MISSED``): ``translation_key_padding_polarity`` (``padding-polarity``): the scores'
``masked_fill`` hides every real key and keeps only the pads; the mask is built inside the model from the token ids
(``src == PAD_IDX``), so no padding contract is read and nothing is said (not even the ``lengths-unmeasured`` note
the x-transformers file gets for its mask built from lengths).

False or misleading messages (for the engine, not fixed in this round):

* ``diffusers_temporal_out_reshape`` (correct): ``!`` for diffusers' standard ``head_to_batch_dim`` (``(b * heads,
  s, d)``): "reshape #13 turns [B·N=40, H=4, F=3, d_k=8] into [B·N·H=160, F=3, d_k=8] ... (batch entry, token,
  head) tuple. That is fine as a layout exercise." (a warning on correct code, whose kind names features that are
  not merged; named in ``WARNED`` so the round's third test passes, not because it is honest);
* ``diffusers_temporal_out_reshape`` (``reported-reshape``): ``✗ mixed-axis`` at DIMS on code whose output equals
  the fix (the intermediate is mislabelled, the result is not); at equal sizes a note calls the output unfold a
  "nonstandard-head-split" ("H=4 heads of d_k=8") where no heads are split;
* ``xtransformers_left_pad_cache`` (``causal-top-left``): caught, but as ``mask-polarity`` ("A padding mask in
  nn.MultiheadAttention's convention (True = padding) looks like this"): the mask's polarity is right; the causal
  part is aligned top-left, so the left-padded row's decoded token keeps only key 0, a pad;
* ``moeut_rope_cache_offset``: ``offset-before-cache`` gets only a note ("the tables hold the same value on every
  feature (position 0 alone)", as ``rotary-pairing-unchecked``) though a decoded token at position 0 is the bug;
  the correct file stays ``?`` for ``narrow`` on the rotary table and ``q[..., :n_rotate]``;
* ``translation_key_padding_polarity`` at equal sizes: 0 of 28 ops checked (the sequence-first token ids ``(T,
  B)`` with B = T).

Fixed since first sight (tests/engine/test_round59_fixes.py): a fold of batch entries, tokens and heads that every
product keeps as its batch while it scores a sequence whose role the dims do not say (diffusers' frames ``F``:
scores ``[B·N·H, F, F]``) is a batch (rules/row_folds), so the correct diffusers file is ``?``, no longer a false
``!``; the ``tokens-merged-with-features`` warnings of its two bugs went with it.
"""

from __future__ import annotations

import torch

from tests.corpus.helpers import round_outcome, round_sizes, round_tests
from tests.corpus.reports45 import (
    diffusers_temporal_out_reshape,
    moeut_rope_cache_offset,
    opensora_plan_attnblock3d,
    translation_key_padding_polarity,
    xtransformers_left_pad_cache,
)

MODULES = (opensora_plan_attnblock3d, moeut_rope_cache_offset, diffusers_temporal_out_reshape,
           translation_key_padding_polarity, xtransformers_left_pad_cache)
UNSURE, SURE = ("?", ()), ("✓", ())
POLARITY = ("✗", ("mask-polarity",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (opensora_plan_attnblock3d, ""): [SURE, SURE],
    (opensora_plan_attnblock3d, "no-time-permute"): [("✗", ("mixed-axis",) * 3)] * 2,
    (opensora_plan_attnblock3d, "weights-not-permuted"): [("✗", ("values-by-queries",))] * 2,
    (moeut_rope_cache_offset, ""): [UNSURE, UNSURE],
    (moeut_rope_cache_offset, "offset-before-cache"): [UNSURE, UNSURE],
    (moeut_rope_cache_offset, "mask-not-inverted"): [("✗", ("mask-polarity", "causal-mask-reversed")), POLARITY],
    (diffusers_temporal_out_reshape, ""): [UNSURE, UNSURE],
    (diffusers_temporal_out_reshape, "in-frames-not-permuted"): [("✗", ("mixed-axis",)),
                                                                 ("✗", ("mixed-axis", "broadcast-mismatch"))],
    (diffusers_temporal_out_reshape, "out-permute-hw-swapped"): [("✗", ("mixed-axis",)),
                                                                 ("✗", ("broadcast-mismatch",))],
    (translation_key_padding_polarity, ""): [SURE, UNSURE],
    (translation_key_padding_polarity, "padding-polarity"): [SURE, UNSURE],
    (translation_key_padding_polarity, "merge-without-transpose"): [("✗", ("mixed-axis",)),
                                                                    ("✗", ("broadcast-mismatch",))],
    (xtransformers_left_pad_cache, ""): [UNSURE, UNSURE],
    (xtransformers_left_pad_cache, "left-pad-as-context-mask"): [UNSURE, UNSURE],
    (xtransformers_left_pad_cache, "causal-top-left"): [POLARITY, POLARITY],
}

#: bugs that keep ``✓``: ``padding-polarity`` (every real key hidden, the pads kept: the mask is built inside the
#: model from the token ids, so no padding contract is read)
MISSED = {(translation_key_padding_polarity, "padding-polarity")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))


def test_the_reported_diffusers_reshape_changes_no_output_but_gets_a_cross():
    """diffusers #5633's reported ``reshape(..., channel, num_frames)`` gives the fix's output exactly; the engine
    still says ``✗ mixed-axis`` at DIMS (a false error on output-equal code, recorded as measured; at equal sizes
    ``?``, its ``tokens-merged-with-features`` warning gone with the fix of the correct file's)."""
    module, bug = diffusers_temporal_out_reshape, diffusers_temporal_out_reshape.REPORTED
    fixed, inputs = module.build("")
    reported, same_inputs = module.build(bug)
    with torch.no_grad():
        assert torch.equal(fixed(*inputs), reported(*same_inputs))
    assert [round_outcome(module, bug, dims) for dims in round_sizes(module)] == \
        [("✗", ("mixed-axis",)), UNSURE]
