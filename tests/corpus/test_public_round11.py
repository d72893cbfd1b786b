"""An eleventh round of public-style files (tests/corpus/public11, each citing its source), traced at distinct
sizes and at B = T = H = 4, as a held-out set traces them, first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | B = T = H = 4), on 14a2e35:

=================  ====================  ===============================  ==================================
file               variant               B=2 T=6 (H_kv=2)                 B=T=H=4
=================  ====================  ===============================  ==================================
gptj               (correct)             ✓                                ?
gptj               rotate-half           ✗ rotary-pairing-mismatch        ✗ rotary-pairing-mismatch
codegen            (correct)             ✗ batch-mismatch ×2 (false)      ✗ batch-mismatch ×2 (false)
codegen            split-qkv (twin)      ✗ batch-mismatch ×2 (false)      ✗ batch-mismatch ×2 (false)
codegen            merge-no-permute      ✗ batch-mismatch ×2, mixed-axis  ✗ batch-mismatch ×2 (wrong cause)
phi3               (correct)             ✓                                ?
phi3               value-offset          ✗ fused-part-taken-twice         ✗ fused-part-taken-twice
stablelm           (correct)             ✓                                ?
stablelm           cos-sin-swapped (twin)✓                                ?
stablelm           unsqueeze-dim-2 (*)   raises                           ✗ broadcast-mismatch
qwen3              (correct)             ✓                                ?
qwen3              norm-whole-width(twin)✓                                ?
opt                (correct)             ✓                                ?
opt                weights-view-order    raises                           ?
gpt2               (correct)             ✓                                ?
gpt2               split-no-permute      raises                           ✗ attends-over-wrong-axis
talking_heads      (correct)             ? (#10 einsum... unnamed)        ?
talking_heads      causal-diagonal       ? (missed)                       ? (missed)
gpt_oss_sinks      (correct)             ? (#20 reshape, #21 expand)      ?
gpt_oss_sinks      drop-first-column     ? (missed)                       ? (missed)
mistral_sliding    (correct)             ✓                                ?
mistral_sliding    tril-offset           ✓ (a bug passed)                 ?
mha_batch_first    (correct)             ✓                                ?
mha_batch_first    default-batch-first   ✗ attends-over-batch             ?
mha_batch_first    batch-first-false     ✓                                ?
palm_mqa           (correct)             ✓                                ?
palm_mqa           sim-transposed        ✗ query-key-swapped, softmax-... ✗ query-key-swapped, softmax-...
=================  ====================  ===============================  ==================================

(*) written after the first sight, to replace the swap made a twin; traced first on 1a66d1a, before any change
its outcome rests on. mha_batch_first was first written with a key_padding_mask: its bug then raised an
AssertionError at B != T (which round_outcome does not catch) and its correct file was "? 25 of 29" (the mask's
views inside torch unnamed); the file gives no mask now, and tests/engine/test_infer_record.py keeps that case.
At distinct sizes the 16 correct runs were ✓ 12, ? 2, ✗ 2 (false); the 11 bugs ✗ 5, ? 2, ✓ 1, raise 3. StableLM's
cos/sin swap and Qwen3's whole-width q/k norm were first written as bugs and were ✓; they are twins: the swap is a
rotary with its angles negated times a fixed quarter turn (the score a function of the distance alone), the norm
is OLMo-2's published design, and on random weights nothing torch records tells either from the correct file (the
files say so). ``shapetrace trace`` (dependency contracts measured) differed: talking heads' correct file was
``! heads-talk ×2``, and the sliding window's bug ``✗ causal-mask-leaks``.

The fixes, one general mechanism each (tests in the engine's modules say what each fixes): equal parts of one axis
line up position by position (``axes.as_parallel_part``: CodeGen); a causal triangle off its diagonal is read
from the mask's values and leaves the verdict unproven (``directions.looks_ahead``: the sliding window's
``tril(diagonal=1)``, which a look-ahead window by design also is, so ``?``, not ``✗``); a join names the heads of
what it joins to the scores (``infer/backward._joined_heads``: gpt-oss's sinks); a slice of a join cut across its
parts is told apart from a part (``rules/contracts.part_beside_slice``: the sink dropped from the wrong end); an
einsum that keeps both score axes keeps their roles (``axis_compute._scores_kept``: the mask on talking heads); the
scores' heads summed against a learned ``(H, H)`` parameter are a note, not a warning (``rules/head_mixing``).
Now at distinct sizes: correct ✓ 15, ? 1 (talking heads: the heads after the mix are new ones, named by nothing);
bugs ✗ 7, ? 1 (the window's look-ahead), ✓ 0, raise 3. What stays ``?`` at B = T = H = 4 rests on names found
from sizes alone (the input ``[4, 4, D]`` fits two orders)."""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public11 import (
    codegen,
    gpt2,
    gpt_oss_sinks,
    gptj,
    mha_batch_first,
    mistral_sliding,
    opt,
    palm_mqa,
    phi3,
    qwen3,
    stablelm,
    talking_heads,
)

MODULES = (gptj, codegen, phi3, stablelm, qwen3, opt, gpt2, talking_heads, gpt_oss_sinks, mistral_sliding,
           mha_batch_first, palm_mqa)
OK, UNSURE, RAISES = ("✓", ()), ("?", ()), ("raises", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (gptj, ""): [OK, UNSURE],
    (gptj, "rotate-half"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (codegen, ""): [OK, UNSURE],
    (codegen, "split-qkv"): [OK, UNSURE],
    (codegen, "merge-no-permute"): [("✗", ("mixed-axis",))] * 2,
    (phi3, ""): [OK, UNSURE],
    (phi3, "value-offset"): [("✗", ("fused-part-taken-twice",))] * 2,
    (stablelm, ""): [OK, UNSURE],
    (stablelm, "cos-sin-swapped"): [OK, UNSURE],
    (stablelm, "unsqueeze-dim-2"): [RAISES, ("✗", ("broadcast-mismatch",))],
    (qwen3, ""): [OK, UNSURE],
    (qwen3, "norm-whole-width"): [OK, UNSURE],
    (opt, ""): [OK, UNSURE],
    (opt, "weights-view-order"): [RAISES, UNSURE],
    (gpt2, ""): [OK, UNSURE],
    (gpt2, "split-no-permute"): [RAISES, ("✗", ("attends-over-wrong-axis",))],
    (talking_heads, ""): [UNSURE, UNSURE],
    (talking_heads, "causal-diagonal"): [("✗", ("causal-mask-hides-itself",))] * 2,
    (gpt_oss_sinks, ""): [OK, UNSURE],
    (gpt_oss_sinks, "drop-first-column"): [("✗", ("contracts-different-axes",))] * 2,
    (mistral_sliding, ""): [UNSURE, UNSURE],   # (✓ up to b2f62da: its band of sliding_window + 1 keys, unchecked)
    (mistral_sliding, "tril-offset"): [UNSURE, UNSURE],
    (mha_batch_first, ""): [OK, UNSURE],
    (mha_batch_first, "batch-first-false"): [OK, UNSURE],
    (mha_batch_first, "default-batch-first"): [("✗", ("attends-over-batch",)), UNSURE],
    (palm_mqa, ""): [OK, UNSURE],
    # (round 47: the einsum writes its second operand's tokens first, the layout of Keras's correct
    # ``einsum("aecd,abcd->acbe", key, query)`` (public47 keras_mha); the operands' order no longer names the
    # axes there, so the softmax is not read as over the queries: the projections still say k·q)
    (palm_mqa, "sim-transposed"): [("✗", ("query-key-swapped",))] * 2,
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)


def test_the_sliding_window_says_why_its_look_ahead_is_not_checked():
    from tests.corpus.helpers import traced_build

    t = traced_build(mistral_sliding, "tril-offset", mistral_sliding.DIMS[0])
    assert [(d.kind, d.severity) for d in t.diagnostics] == [("mask-looks-ahead", "note")]
    assert "keeps the next key ([1, 1, T=6, T=6])" in t.diagnostics[0].message
