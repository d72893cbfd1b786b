"""An eleventh round of files after public bug reports (tests/corpus/reports11; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on eea3781 before any fix.

* ernie_image_rope_blocked — baidu/ERNIE-Image issue #6: a DiT's angles interleaved (``repeat_interleave(2)``)
  under Megatron's blocked rotation (``chunk(2)``, ``cat((-x2, x1))``), ``bshd`` heads, a partial rotary;
* veomni_repeat_kv_bshd — ByteDance-Seed/VeOmni PR #162: transformers' ``repeat_kv`` (made for ``bhsd``)
  applied to ``bshd`` keys and values, so the tokens are repeated instead of the kv heads;
* gemma3_images_future — huggingface/transformers issue #38053 (PR #38080): Gemma 3's image tokens opened to
  every other image's on the causal mask, so the first image reads the second;
* internlm3_ntk_heads_axis — ml-explore/mlx-lm issue #1545 (PR #1553): InternLM3's dynamic-NTK length read
  from ``shape[1]`` of ``[B, H, T, d]`` queries (the heads; a twin: see its docstring);
* zeta_rmsnorm_tokens — kyegomez/zeta issue #180: ``RMSNorm`` with ``torch.norm(x, dim=-2)`` (over the
  tokens) before causal attention;
* scope_topk_offset — Linking-ai/SCOPE issue #6: a decoding KV compression's top-k indices, relative to a
  slice of the cache, gathered from the whole cache without the slice's start.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "B=2 T=6 D=32 H=4"``, which measures the dependency contracts):

========================  ========================  =========================================  ======================
file                      variant                   first sight on eea3781 (DIMS/equal; CLI)   now (DIMS/equal; CLI)
========================  ========================  =========================================  ======================
ernie_image_rope_blocked  (correct)                 ✓ 28 ops / ? 9 of 28; CLI ✓ 31 ops         unchanged
ernie_image_rope_blocked  interleaved-table         ✗ / ✗ rotary-pairing-mismatch; CLI ✗       unchanged
veomni_repeat_kv_bshd     (correct)                 ✓ 15 ops / ? 0 of 15; CLI ✓ (H_kv=2), ?    unchanged
                                                    3 of 15 without H_kv
veomni_repeat_kv_bshd     repeat-kv-on-bshd         ✗ / ✗ causal-mask-misaligned; CLI ✗        unchanged
gemma3_images_future      (correct)                 ? 28 of 28 / ?; CLI ✗ causal-mask-leaks    ? / ?; CLI ? 17 of 30
gemma3_images_future      all-images-bidirectional  ✓ 23 ops / ?; CLI ✗ causal-mask-leaks      ! / ?; CLI ✗ (+ warning
                                                                                               mask-skips-ahead)
internlm3_ntk_heads_axis  (correct)                 ✓ 25 ops / ? 8 of 25; CLI ✓                unchanged
internlm3_ntk_heads_axis  seq-len-from-heads        ✓ / ?; CLI ✓                               unchanged (twin)
zeta_rmsnorm_tokens       (correct)                 ✓ 17 ops / ? 1 of 17; CLI ✓                unchanged
zeta_rmsnorm_tokens       rms-over-tokens           ! normalised-over-tokens / ?; CLI ✗        unchanged
                                                    causal-mask-leaks (+ the warning)
scope_topk_offset         (correct)                 ? 25 of 29 / ? nothing; CLI ? 25 of 29     unchanged
scope_topk_offset         topk-without-offset       ? / ?; CLI ?                               ✗ / ?; CLI ✗
                                                                                               (index-wrong-axis ×2)
========================  ========================  =========================================  ======================

At first sight, at DIMS (``round_outcome``), the 6 correct files were ✓ 4, ? 2, ✗ 0 (the CLI: ✓ 4, ? 1, ✗ 1,
gemma3's correct mask read as a leak); the 5 bugs ✗ 2, ! 1, ? 1, ✓ 1 (gemma3's; the CLI: ✗ 4, ? 1, ✓ 0), and the
twin ✓. Now: the correct files ✓ 4, ? 2, ✗ 0 (the CLI ✓ 4, ? 2, ✗ 0); the bugs ✗ 3, ! 2, ? 0, ✓ 0 (the CLI ✗ 5).
The fixes:

* engine/directions.opened_future, engine/unattended: a causal mask opened onto later keys is read on its
  values: contiguous bidirectional blocks (a prefix LM's prefix, one block per image) are the design, and the
  dependency check sets aside the queries whose block holds the last token, as it sets aside padded queries
  with no key left (in a slice that hides some later key: one open everywhere still leaks); a later key seen
  across a hidden real key (``mask-skips-ahead``, a warning) is no block at all;
* engine/indices: ``topk``'s indices count the axis they ran over; over a slice (``T[2:5]``) they count from
  its start until that start is added (``+ 2``, a plain int the capture now keeps for an addition), a ``cat``
  passes on the one count its parts carry, and a pick along a range of the same axis that starts elsewhere
  (``T[0:5]``) is ``index-wrong-axis``.

Open: InternLM3's length is a Python int torch never sees used (a twin); veomni's correct file is ``?`` when the
sizes do not name the kv heads (``H_kv``); gemma3's correct file is ``?`` (the shifted flags ``pad(...)[:, :-1]``
are ``(1+T)[0:6]``, not proven to be the tokens).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports11 import (
    ernie_image_rope_blocked,
    gemma3_images_future,
    internlm3_ntk_heads_axis,
    scope_topk_offset,
    veomni_repeat_kv_bshd,
    zeta_rmsnorm_tokens,
)

MODULES = (ernie_image_rope_blocked, veomni_repeat_kv_bshd, gemma3_images_future, internlm3_ntk_heads_axis,
           zeta_rmsnorm_tokens, scope_topk_offset)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (ernie_image_rope_blocked, ""): [OK, UNSURE],
    (ernie_image_rope_blocked, "interleaved-table"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (veomni_repeat_kv_bshd, ""): [OK, UNSURE],
    (veomni_repeat_kv_bshd, "repeat-kv-on-bshd"): [("✗", ("causal-mask-misaligned",))] * 2,
    (gemma3_images_future, ""): [UNSURE, UNSURE],
    (gemma3_images_future, "all-images-bidirectional"): [("!", ("mask-skips-ahead",)), UNSURE],   # (✓ ? at eea3781)
    (internlm3_ntk_heads_axis, ""): [OK, UNSURE],
    (internlm3_ntk_heads_axis, "seq-len-from-heads"): [OK, UNSURE],   # (a twin: the same ops as no scaling)
    (zeta_rmsnorm_tokens, ""): [OK, UNSURE],
    (zeta_rmsnorm_tokens, "rms-over-tokens"): [("!", ("normalised-over-tokens",)), UNSURE],
    (scope_topk_offset, ""): [UNSURE, UNSURE],
    (scope_topk_offset, "topk-without-offset"): [("✗", ("index-wrong-axis",) * 2), UNSURE],   # (? ? at eea3781)
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(gemma3_images_future, "all-images-bidirectional"), (veomni_repeat_kv_bshd, "repeat-kv-on-bshd")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
