"""A twentieth round of files after public bug reports (tests/corpus/reports20; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on 4e3d137 (the files committed before
any engine change). A short round: four files.

* xllm_mrope_first_half — xLLM-AI/xllm PR #746: M-RoPE's temporal / height / width sections picked from the
  first half of the doubled ``cat((freqs, freqs))`` table only, the second half left as the temporal row's;
* diffusers_self_mask_to_cross — huggingface/diffusers PR #2656: the block's ``attention_mask`` (the image
  tokens', for ``attn1``) handed to the cross-attention ``attn2`` too, padded by ``prepare_attention_mask`` to
  the text keys' length;
* rasbt_mha_wrapper_widths — rasbt/LLMs-from-scratch issue #67 / PR #68: the bonus notebook's MHA wrapper with
  heads of the full ``d_out`` and no output projection (a twin: the book's main chapter does so on purpose);
* mosaic_alibi_unassigned — mosaicml/examples PR #247: ``attn_bias.add(alibi)`` with its result dropped, so
  MosaicGPT ran without ALiBi.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, the same at DIMS):

============================  ===================  ====================================  =======================
file                          variant              first sight on 4e3d137 (DIMS/equal)   now (this commit)
============================  ===================  ====================================  =======================
xllm_mrope_first_half         (correct)            ? 6 of 55 / ?                         unchanged
xllm_mrope_first_half         sections-first-half  ✗ rotary-pairing-mismatch (both)      unchanged
diffusers_self_mask_to_cross  (correct)            ✓ 46 ops / ?                          unchanged
diffusers_self_mask_to_cross  self-mask-to-cross   ✓ 47 ops / ?                          ✗ mask-wrong-axis / ?
rasbt_mha_wrapper_widths      (correct)            ? 12 of 34 / ?                        ✓ / ? (module_heads)
rasbt (twin)                  head-width-d-out     ! scale-not-head-dim (both)           ✓ / ?
mosaic_alibi_unassigned       (correct)            ? 18 of 21 / ?                        unchanged
mosaic_alibi_unassigned       bias-not-assigned    ? 17 of 21 / ?                        unchanged
============================  ===================  ====================================  =======================

At first sight the 4 correct files were ✓ 1, ? 3, ✗ 0 (the CLI the same); the 3 bugs ✗ 1 (xLLM's M-RoPE), ? 1,
✓ 1 (diffusers' mask), and the twin ``!``. diffusers' first sight was taken at ``T=4 S=6`` (T the size of H);
its DIMS are now ``T=5 S=7``, where the first sight was the same (✓ on both, measured with the new check
patched out). The fixes:

* engine/rules/masks ``_base_built_for_another`` (tests/engine/test_masks.py): a ``baddbmm``'s base (diffusers'
  ``get_attention_scores``, ``baddbmm(mask, q, kᵀ, beta=1)``) is read as a mask added to the scores by the same
  check as a filled or added one: a mask whose key axis holds another sequence's tokens (``T+2``, the image
  tokens' mask padded onto the text keys S) is ``mask-wrong-axis``. Names prove it, never sizes: by sizes alone
  at T = H the image tokens cannot be told from the heads, and nothing is said (the equal-size column).
* engine/rules/masks ``_contracted_width``: scores masked before they are scaled (``masked_fill_`` then ``/
  keys.shape[-1] ** 0.5``) are read back through the fill to the product, so a head as wide as the model scaled
  by its own width is no ``scale-not-head-dim`` (the twin); a head d_k wide so scaled still warns.

Open:

* mosaic_alibi_unassigned: ``?`` on both (the bias slice ``[..., -s_k:]`` and its add unnamed). The bug is a
  dropped result: an attention without ALiBi is correct code elsewhere (any causal model), so only the unread
  ``add`` could tell it; ``projection-bypassed`` reads unread ``linear`` results alone.
* xllm_mrope_first_half (correct): ``?`` (the grid positions of the image tokens are values). The book's heads,
  a ``ModuleList`` concatenated, were ``?`` too; now ``✓`` at DIMS (engine/infer/module_heads: sibling
  single-head modules joined on the features name each projection ``d_k`` and the cat ``H·d_k``).
* the equal-size column is ``?`` throughout (nothing is named by size alone).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports20 import (
    diffusers_self_mask_to_cross,
    mosaic_alibi_unassigned,
    rasbt_mha_wrapper_widths,
    xllm_mrope_first_half,
)

MODULES = (xllm_mrope_first_half, diffusers_self_mask_to_cross, rasbt_mha_wrapper_widths, mosaic_alibi_unassigned)
OK, UNSURE = ("✓", ()), ("?", ())
PAIRING, WRONG_AXIS = ("✗", ("rotary-pairing-mismatch",)), ("✗", ("mask-wrong-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (xllm_mrope_first_half, ""): [UNSURE, UNSURE],
    (xllm_mrope_first_half, "sections-first-half"): [PAIRING, PAIRING],
    (diffusers_self_mask_to_cross, ""): [OK, UNSURE],
    (diffusers_self_mask_to_cross, "self-mask-to-cross"): [WRONG_AXIS, UNSURE],
    (rasbt_mha_wrapper_widths, ""): [OK, UNSURE],
    (rasbt_mha_wrapper_widths, "head-width-d-out"): [OK, UNSURE],
    (mosaic_alibi_unassigned, ""): [UNSURE, UNSURE],
    (mosaic_alibi_unassigned, "bias-not-assigned"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(xllm_mrope_first_half, "sections-first-half"), (diffusers_self_mask_to_cross, "self-mask-to-cross")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
