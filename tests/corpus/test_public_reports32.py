"""A thirty-second round of files after public bug reports (tests/corpus/reports32; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED``, at equal sizes too (B = T = H = 4, or
the module's own ``EQUAL`` reading; the other rows' equal-size outcomes were measured once and are kept in the
table: the suite's time is a budget). First sight recorded on 3525dce (main at 32d4522 plus the round's files).

* aladdin_scale_embed — aladdinpersson/Machine-Learning-Collection issue #65: the from-scratch transformer's
  einsum attention scaled by ``1/sqrt(embed_size)`` instead of ``1/sqrt(head_dim)``;
* candle_qwen2_causal — huggingface/candle pull request #3609 (issue #3567): Qwen2's mask built from the padding
  alone when a mask is given, with no causal triangle (bidirectional attention in a causal LM);
* clip4clip_mask_repeat — ArrowLuo/CLIP4Clip issue #22: ``nn.MultiheadAttention``'s 3-d mask tiled with
  ``repeat(n_head, 1, 1)`` (``H·N``) where the module reads entry ``b·H + h`` (``repeat_interleave``);
* vllm_ascend_mrope_style — vllm-project/vllm-ascend pull request #12820: a GPT-J style (interleaved) model's
  multimodal rotary applied in halves (NeoX style) whatever its ``is_neox_style``.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also measures the dependency contracts, in the last column).

=======================  ==============  ============================  ======================================
file                     variant         round_outcome 3525dce         CLI on 3525dce
=======================  ==============  ============================  ======================================
aladdin_scale_embed      (correct)       ✓ / ?                         ✓ all 18
aladdin_scale_embed      scale-by-embed  ! scale-not-head-dim /        ! scale-not-head-dim
                                         ! scale-not-head-dim
candle_qwen2_causal      (correct)       ? / ?                         ? 21 of 38 (✓ with H_kv=2)
candle_qwen2_causal      padding-only    ? / ?                         ? 20 of 37 (**✓** with H_kv=2)
clip4clip_mask_repeat    (correct)       ✓ / ?                         ✓ all 32
clip4clip_mask_repeat    mask-tiled      **✓** / ?                     ✗ batch-entries-mix (on the values)
vllm_ascend_mrope_style  (correct)       ? / ?                         ? 31 of 41 (#22 stack, #23 flatten)
vllm_ascend_mrope_style  neox-on-gptj    **✓** / **✓**                 **✓** all 37
=======================  ==============  ============================  ======================================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 2, ? 2, ✗ 0 (the CLI the same); the 4 bugs
✓ 2, ? 1, ! 1, ✗ 0 (the CLI: ✓ 1, ? 1, ! 1, ✗ 1).

Fixed (899fe98): clip4clip ``mask-tiled`` was ``✓``. ``nn.MultiheadAttention`` views its 3-d ``(N·H, L, S)``
mask to ``[N, H, L, S]`` before SDPA; tiled ``repeat(H, 1, 1)`` the view is ``[copies=2, 2·B=4, T, T]`` (where
each element came from: the repeat's copies outermost) against queries ``[B, H, T, d_k]``: the mask's batch sits
on the heads axis. ``mask-wrong-batch-order`` read only fills and ``baddbmm`` bases; it now reads a kernel's own
mask too (shapetrace/engine/rules/fused_mask_order.py): ``✗ mask-wrong-batch-order`` (the CLI too), the
``repeat_interleave`` file stays ``✓``; at B = T = H = 4 both stay ``?`` (no name from sizes).

After the round: correct ✓ 2, ? 2, ✗ 0 (the CLI too); bugs ✗ 1, ? 1, ! 1, ✓ 1 (a named miss, since fixed).

Fixed later (round 51, tests/corpus/test_public_round51.py): vllm_ascend_mrope_style ``neox-on-gptj`` was ``✓``:
the table and the rotation agree with each other (halves and halves), as in the kernel's half mode, and only the
model's own flag (``rotary_emb.is_neox_style = False``) says which features are pairs. A module's flags that say
how its rotary pairs features (shapetrace/engine/modules.py ``declared_pairings``) are now compared with the
pairing the rotation's data moves give: ``! rotary-pairing-declared``, at DIMS and at equal sizes.

Open (known misses):

* vllm_ascend_mrope_style's correct file is ``?``: the GPT-J rotation's ``stack((o1, o2), -1)
  .flatten(-2)`` re-interleaves ``x[..., ::2]`` and ``x[..., 1::2]`` after an elementwise mix of the two, so
  where each output feature came from is not one input feature and the flattened axis stays unnamed (and the
  even/odd slices are spelled ``D/2%4``, a true but unreadable name).
* candle_qwen2_causal ``padding-only``: ``?`` at DIMS (the grouped key/value heads are unnamed without
  ``H_kv``), and ``✓`` with ``H_kv=2`` declared: bidirectional attention over the real tokens is what an encoder
  does; nothing in the run says this decoder means to be causal.
* aladdin_scale_embed ``scale-by-embed`` is a warning (``!``), not an error, as the rule words it.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports32 import (
    aladdin_scale_embed,
    candle_qwen2_causal,
    clip4clip_mask_repeat,
    vllm_ascend_mrope_style,
)

MODULES = (aladdin_scale_embed, candle_qwen2_causal, clip4clip_mask_repeat, vllm_ascend_mrope_style)
UNSURE, SURE = ("?", ()), ("✓", ())
SCALE = ("!", ("scale-not-head-dim",))
DECLARED = ("!", ("rotary-pairing-declared",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (aladdin_scale_embed, ""): [SURE, UNSURE],
    (aladdin_scale_embed, "scale-by-embed"): [SCALE, SCALE],
    (candle_qwen2_causal, ""): [UNSURE, UNSURE],
    (candle_qwen2_causal, "padding-only"): [UNSURE, UNSURE],
    (clip4clip_mask_repeat, ""): [SURE, UNSURE],
    (clip4clip_mask_repeat, "mask-tiled"): [("✗", ("mask-wrong-batch-order",)), UNSURE],
    (vllm_ascend_mrope_style, ""): [UNSURE, UNSURE],
    (vllm_ascend_mrope_style, "neox-on-gptj"): [DECLARED, DECLARED],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(clip4clip_mask_repeat, "mask-tiled"), (vllm_ascend_mrope_style, "neox-on-gptj")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
