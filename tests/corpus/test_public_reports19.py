"""A nineteenth round of files after public bug reports (tests/corpus/reports19; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on a69859d (the files committed before
any engine change). A short round: four files.

* ethen_mha_unprojected — ethen8181/machine-learning issue #13: the notebook's ``MultiHeadAttention`` did not
  scale its scores and returned the merged heads, its ``linear_proj`` computed and dropped;
* sink_cache_query_position — huggingface/transformers issue #35350: an attention-sink cache re-bases its keys
  to their index in the cache while the new query is rotated at its absolute position;
* lens_gptj_rotary_comma — TransformerLensOrg/TransformerLens issue #364 / PR #365: a trailing comma made
  ``if (… in [...],):`` always true, so GPT-J's interleaved table was rotated by ``rotate_half``;
* mimo_value_scale_dropped — NVIDIA-NeMo/Megatron-Bridge PR #4155: MiMo-V2-Flash's ``attention_value_scale``
  read from the config and never applied.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, which measures the dependency contracts):

=========================  =======================  ==========================================  ====================
file                       variant                  first sight on a69859d (DIMS/equal; CLI)    now (this commit)
=========================  =======================  ==========================================  ====================
ethen_mha_unprojected      (correct)                ✓ 44 ops / ? 2 of 44; CLI ✓ 44 ops          unchanged
ethen_mha_unprojected      unprojected              ✓ 44 ops / ? 2 of 44; CLI ✓ 44 ops          ! projection-bypassed
                                                                                                (both; CLI too)
ethen (twin)               unscaled                 ✓ 44 ops / ? 2 of 44; CLI ✓ 44 ops          unchanged
sink_cache_query_position  (correct)                ? 67 of 128 / ? 21 of 128; CLI ? 67 of 128  unchanged
sink_cache_query_position  absolute-query-position  ? 67 of 128 / ? 21 of 128; CLI ? 67 of 128  unchanged
lens_gptj_rotary_comma     (correct)                ? 4 of 32 / ? 0 of 32; CLI ? 4 of 32        ? 18 of 32 / ? 14 of
                                                                                                32; CLI ? 18 of 32
lens_gptj_rotary_comma     comma-always-true        ? 4 of 32 / ? 0 of 32; CLI ? 4 of 32        ✗ rotary-pairing-
                                                                                                mismatch (both; CLI)
mimo_value_scale_dropped   (correct)                ✓ 33 ops / ? 10 of 33; CLI ✓ 33 ops         unchanged
mimo (twin)                value-scale-dropped      ✓ 33 ops / ? 10 of 33; CLI ✓ 33 ops         unchanged
mimo (twin)                scale-in-softmax         ✓ 33 ops / ? 10 of 33; CLI ✓ 33 ops         unchanged
=========================  =======================  ==========================================  ====================

At first sight, at DIMS, the 4 correct files were ✓ 2, ? 2, ✗ 0 (the CLI the same); the 5 variants written as
bugs ✓ 3 (``unprojected``, ``unscaled``, ``scale-in-softmax``), ? 2, ✗ 0, and the file's reported bug
``value-scale-dropped`` ✓. Three of those ✓ were made twins after that first sight (a69859d, before any engine
change): scores left unscaled are T5's (Mesh TensorFlow folds the scale into the initialisation), a scale other
than ``1/√d_k`` is Gemma 2 27B's (``query_pre_attn_scalar`` 144 with heads of 128), and an attention without a
value scale is most models'. Now the correct files are ✓ 2, ? 2, ✗ 0 (the CLI too), and the 3 bugs ! 1 (the one
left with ``✓``), ✗ 1 (GPT-J's rotary), ? 1 (the sink cache). The fixes:

* engine/unread, rules/unread (tests/engine/test_unread.py): a ``linear`` whose result no op reads and the
  model does not return, in a module whose projection is never used on any call, while the tensor it
  projected is read by another op, is ``projection-bypassed`` (a warning): the projection's input went on in
  its place. Mask2Former's class head (public17), run after every layer with only the last prediction
  returned, and a prefill whose caller drops its output (reports17 tinyllm) are not.
* engine/rotary (tests/engine/test_rotary.py): a rotation written into a copy (``rot_x = x.clone()``,
  ``rot_x[..., :n] = -x[..., n:]``, TransformerLens's ``rotate_every_two``) is replayed with its writes: the
  ``__setitem__`` records that wrote into a node the chain walks are walked and replayed out of place on
  coordinates, so the rotation's pairs are read and its table compared. GPT-J's interleaved table under the
  split-half writes is ``✗ rotary-pairing-mismatch``; the correct file's rotations are now checked on their
  tables (``? 4 of 32`` -> ``? 18 of 32``). A corpus-wide scan (292 modules, 780 variants at DIMS) changed
  nothing else.

Open:

* sink_cache_query_position: ``?`` on both (the decode steps' keys cut from the cache, ``(1+(1+T[3:6]+1)[2:5]
  +1)[2:5]``, and the split of the step inputs go unnamed). Which position a query is rotated at is a value
  (an ``arange`` from a cache length or from a counter of tokens seen), and on random weights both runs are
  equally plausible; the bug needs a contract on rotary positions against the cache's re-based keys.
* lens_gptj_rotary_comma (correct): ``?``; the ``einsum`` projections by ``(head_index, d_model, d_head)``
  parameters leave the heads unnamed (the scores' ``einsum`` shows which axis is the heads and which is
  summed, but no inference reads a parameter's axes from it yet).
* the equal-size column is ``?`` throughout (nothing is named by size alone).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports19 import (
    ethen_mha_unprojected,
    lens_gptj_rotary_comma,
    mimo_value_scale_dropped,
    sink_cache_query_position,
)

MODULES = (ethen_mha_unprojected, sink_cache_query_position, lens_gptj_rotary_comma, mimo_value_scale_dropped)
OK, UNSURE = ("✓", ()), ("?", ())
BYPASSED, PAIRING = ("!", ("projection-bypassed",)), ("✗", ("rotary-pairing-mismatch",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (ethen_mha_unprojected, ""): [OK, UNSURE],
    (ethen_mha_unprojected, "unprojected"): [BYPASSED, BYPASSED],
    (ethen_mha_unprojected, "unscaled"): [OK, UNSURE],
    (sink_cache_query_position, ""): [UNSURE, UNSURE],
    (sink_cache_query_position, "absolute-query-position"): [UNSURE, UNSURE],
    (lens_gptj_rotary_comma, ""): [UNSURE, UNSURE],
    (lens_gptj_rotary_comma, "comma-always-true"): [PAIRING, PAIRING],
    (mimo_value_scale_dropped, ""): [OK, UNSURE],
    (mimo_value_scale_dropped, "value-scale-dropped"): [OK, UNSURE],
    (mimo_value_scale_dropped, "scale-in-softmax"): [OK, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(ethen_mha_unprojected, "unprojected"), (lens_gptj_rotary_comma, "comma-always-true")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
