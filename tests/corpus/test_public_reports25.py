"""A twenty-fifth round of files after public bug reports (tests/corpus/reports25; each file's docstring cites
its report), traced at their DIMS and, for one row, at B = T = H = 4 (the other rows' equal-size column was
measured once and is kept in the table: the suite's time is a budget), first sight recorded on 4864b09 (the
files committed before any engine change).

* tinyuniverse_repeat_kv_order — datawhalechina/tiny-universe issue #21: GQA's ``repeat_kv`` handed the keys
  before their transpose, so with one key/value head it repeats the tokens (``[B, T*H, 1, d]``), not the heads;
* sooftware_mask_head_order — sooftware/attentions issue #4: the heads folded into the batch head-major
  (``permute(2, 0, 1, 3)``) but the mask repeated batch-major (``unsqueeze(1).repeat(1, N, 1, 1)``) and viewed
  to the scores' shape: each score row gets another sequence's padding;
* vllm_omni_cross_unpad_query — vllm-project/vllm-omni issue #5865: the varlen path's ``_upad_input`` unpads
  (and pads back) the cross-attention's image queries with the text keys' mask indices;
* comfy_fixedkv_decode_positions — Comfy-Org/ComfyUI PR #15698 (review): a decode step over a ``FixedKV``
  cache rotates each row's new token at the prompt's padded width, not at the row's own length ``seqlen[b]``
  (its equal-size reading, ``EQUAL``, takes a cache long enough for four steps).

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims "B=2 T=6 D=32 H=4"`` (``S=4`` for vllm_omni; ``T=1 … S=10`` for comfy), which
also measures the dependency contracts, in the last column). No finding (error or warning) on any row:

==============================  ==========================  =======================  ==============================
file                            variant                     round_outcome 4864b09    CLI on 4864b09
==============================  ==========================  =======================  ==============================
tinyuniverse_repeat_kv_order    (correct)                   ? 5 of 22 / ? 0 of 22    ? 5 of 22
tinyuniverse_repeat_kv_order    repeat-before-transpose     ? 3 of 22 / ? 0 of 22    ? 3 of 22 (heads not measured)
sooftware_mask_head_order       (correct)                   ? 20 of 26 / ? 0 of 26   ? 20 of 26
sooftware_mask_head_order       mask-batch-major            ? 20 of 26 / ? 0 of 26   ? 20 of 26
vllm_omni_cross_unpad_query     (correct)                   ? 26 of 55 / ? none      ? 23 of 57
vllm_omni_cross_unpad_query     query-unpadded-by-key-mask  ? 30 of 61 / ? none      ? 24 of 63
comfy_fixedkv_decode_positions  (correct)                   ? 15 of 34 / ? 0 of 34   ? 15 of 38
comfy_fixedkv_decode_positions  padded-width-positions      ? 17 of 34 / ? 12 of 35  ? 17 of 38
==============================  ==========================  =======================  ==============================

At first sight the 4 correct files were ✓ 0, ? 4, ✗ 0; the 4 bugs ✓ 0, ? 4, ✗ 0 (the CLI the same): no check
mark on a bug, no cross on correct code, and nothing caught.

Open (a later round):

* sooftware_mask_head_order (bug): ``?``: the mask is built from ``input_lengths`` ``[B]`` (a 1-D input as long
  as the batch, left unnamed: "which of its axes is the batch cannot be told"), so its ``B x N`` fold is never
  compared with the scores' ``N x B`` fold; named, the ``view(score.size())`` would merge ``(B, H)`` where the
  scores hold ``(H, B)``, a contract on the fold's order. Named by the user (``shapetrace.name(lengths, "B")``)
  the bug is ``✗ mask-wrong-batch-order`` and the twin ``✓`` (tests/engine/test_masks.py; 005c9a5 made that
  finding's message and fix follow the scores' H·B fold: on 4864b09 it told the user to tile with
  ``repeat_interleave(H, dim=0)``, the bug's own order). Tried and left out: seeding a one-axis argument of the
  model's call as ``[B]`` where B's size is no other declared name's (infer/seeds.py) gives this file ✓ / ✗ and
  reports7 mha_padding_inverted's correct file ✓, but reports14 mac_control_pads' bug ``no-pad-mask`` (the
  control attention without the pad mask its ``question_len`` builds) turned ``✓`` in ``round_outcome``: a mask
  that reaches a masked mean but not the softmax needs a rule before the lengths may be named.
  Branch inputs1 seeds that ``[B]`` (infer/seeds.py ``batch_seed``) together with that check
  (engine/lengths_read.py: a padding mask built from lengths the model was given is ``? not proven: the pads
  ... were not measured unread`` until the padding contract holds on it): this bug is now ``✗
  mask-wrong-batch-order`` at distinct sizes (``?`` on 5774b39; equal sizes still ``?``: B = H names nothing),
  the correct file ``? 26 of 26`` with that reason, mac_control_pads' ``no-pad-mask`` ``? 21 of 21`` likewise.
* tinyuniverse_repeat_kv_order (bug): ``?``: the key/value projections' one-head width (``d``) is not named
  (``#2 linear``), so the ``expand``/``reshape`` that merges the tokens with the repeat (``T*H``) is unchecked;
  the key axis then differs from the queries' in a self-attention.
* vllm_omni_cross_unpad_query (bug): ``?``: the ``nonzero`` indices of the text mask index the image queries'
  flattened ``B*T`` axis; an index's provenance (which axis its positions count) is not carried through
  ``nonzero``/``flatten``.
* comfy_fixedkv_decode_positions (bug): ``?``: the positions' value (``past_len`` vs ``seqlen``) is a value only
  (the cache write agrees with ``seqlen``, the rotation does not); a rule comparing the rotation's positions with
  the cache slot written would tell them apart.
* the equal-size column is ``?`` throughout (nothing is named by size alone).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports25 import (
    comfy_fixedkv_decode_positions,
    sooftware_mask_head_order,
    tinyuniverse_repeat_kv_order,
    vllm_omni_cross_unpad_query,
)

MODULES = (tinyuniverse_repeat_kv_order, sooftware_mask_head_order, vllm_omni_cross_unpad_query,
           comfy_fixedkv_decode_positions)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (tinyuniverse_repeat_kv_order, ""): [UNSURE, UNSURE],
    (tinyuniverse_repeat_kv_order, "repeat-before-transpose"): [UNSURE, UNSURE],
    (sooftware_mask_head_order, ""): [UNSURE, UNSURE],
    (sooftware_mask_head_order, "mask-batch-major"): [("✗", ("mask-wrong-batch-order",)), UNSURE],   # (? on 5774b39)
    (vllm_omni_cross_unpad_query, ""): [UNSURE, UNSURE],
    (vllm_omni_cross_unpad_query, "query-unpadded-by-key-mask"): [UNSURE, UNSURE],
    (comfy_fixedkv_decode_positions, ""): [UNSURE, UNSURE],
    (comfy_fixedkv_decode_positions, "padded-width-positions"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(sooftware_mask_head_order, "mask-batch-major")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
