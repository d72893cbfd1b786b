"""An eighteenth round of files after public bug reports (tests/corpus/reports18; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on f389eb2 (the files committed before
any engine change). A short round: four files.

* audiolm_attn_out_unused — lucidrains/audiolm-pytorch PR #265 (issue #268): after the key/value cache was added,
  the layer's residual added ``x`` instead of the attention's output, so each self-attention was computed and
  dropped;
* tf_time_major_reverse — tensorflow/tensorflow issue #39635: ``Bidirectional`` realigned its backward output with
  a reversal on axis 1, the batch when ``time_major=True``, instead of the time axis;
* gemma2_flex_no_transpose — huggingface/transformers PR #34942: Gemma2's flex attention function returned
  ``(B, H, T, d)`` without the ``transpose(1, 2)`` the other attention functions end with, and the caller's
  ``reshape(bsz, q_len, -1)`` merged heads' rows as tokens;
* ssd_prefix_hit_paged_rows — tanishqkumar/ssd PR #22 (issue #23): a prefix-cache-hit prefill read the paged
  caches as contiguous rows at ``cu_seqlens_k`` (no block table), so other blocks' rows stood for the prefix.

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "<DIMS>"``, which measures the dependency contracts):

========================  =====================  =============================================  =====================
file                      variant                first sight on f389eb2 (DIMS/equal; CLI)       now (this commit)
========================  =====================  =============================================  =====================
audiolm_attn_out_unused   (correct)              ? 43 of 45 / ? 6 of 45; CLI ? 43 of 45          unchanged
audiolm_attn_out_unused   attn-out-unused        ? 43 of 45 / ? 8 of 45; CLI ? 43 of 45          unchanged
tf_time_major_reverse     (correct)              ✓ 38 ops / ? 0 of 38; CLI ✗ causal-mask-leaks   CLI ✓ 38 ops
tf_time_major_reverse     reverse-batch-axis     ✗ roll-not-undone ×2 (both); CLI the same       unchanged
gemma2_flex_no_transpose  (correct)              ? 31 of 38 / ? nothing; CLI ? 33 of 40          ✓ 38 ops; CLI ✓ 40
gemma2_flex_no_transpose  flex-no-transpose      ✗ mixed-axis / ? nothing; CLI ✗ mixed-axis      unchanged
ssd_prefix_hit_paged_rows (correct)              ? nothing / ? nothing; CLI ? nothing            unchanged
ssd_prefix_hit_paged_rows contiguous-cache-rows  ? nothing / ? nothing; CLI ? nothing            unchanged
========================  =====================  =============================================  =====================

At first sight, at DIMS, the 4 correct files were ✓ 1, ? 3, ✗ 0 (the CLI: ✓ 0, ? 3, ✗ 1); the 4 bugs ✗ 2, ? 2,
✓ 0 (the CLI the same). Now the correct files are ✓ 2, ? 2, ✗ 0 (the CLI too); the bugs unchanged. The fixes:

* engine/dependencies, directions (tests/engine/test_dependencies.py): a causal mask applied after the tokens of
  the activations are reversed (a ``flip`` along the tokens of a tensor with a batch axis) declares no causal
  order for the model's output: a bidirectional layer's backward half looks ahead by design. The causal contract
  is then not measured (batch and own-token still are): tensorflow #39635's correct wrapper was ``✗
  causal-mask-leaks`` ("output token 0 of batch 0 depends on input token 5").
* engine/infer/widths (tests/engine/test_infer_widths.py): a projection whose width is both D and H_kv·d_k is
  named ``D_kv`` where a view cuts it into H_kv heads of d_k that attention reads; the search for that attention
  went 8 ops deep, and Gemma-2's key reaches its scores after 10 (the rotation, ``repeat_kv``): it now goes 16
  deep and stops at another projection. The correct gemma2 file was ``? 31 of 38`` (the key unnamed).

Open:

* audiolm_attn_out_unused attn-out-unused (lib14: now ``!`` projection-bypassed, engine/unread's live_nodes: the
  projection's result reaches nothing returned; with the dependency contracts, ``✗ tokens-never-mix`` too since
  engine/mixing.py: no output token reads another; the note below is kept as history): ``?`` like its correct twin.
  An attention whose output never reaches
  the result is also a prefill run for its cache (tests/corpus/reports17/tinyllm_decode_offset.py drops its
  prefill's output by design; here too the keys and values leave through the returned cache), so a dropped
  output is no contract; the ``?`` comes from the ``torch.stack((k, v))`` cache's new axis (unnamed). Mind: the
  bug is ``?`` only for that axis; a change that lets a returned, unread stack's counting axis go unnamed (as
  ``verdict.unpacked_stacks`` does for one taken apart) would make this bug ``✓``.
* gemma2_flex_no_transpose at equal sizes: ``?`` on both (B = T = H = 4: nothing is named by size alone).
* ssd_prefix_hit_paged_rows: ``?`` on both; the packed ``(B * T, D)`` input has no batch axis to name, and which
  cache rows stand for a sequence's prefix is a value of the block table (an index no name holds): the bug is a
  twin in what the names can say; left for a round on index provenance (paged caches).
* tf_time_major_reverse's bug: both findings are true: flip #40 reverses the batch, and so the backward half's
  reversal of the tokens (flip #20) is never undone.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports18 import (
    audiolm_attn_out_unused,
    gemma2_flex_no_transpose,
    ssd_prefix_hit_paged_rows,
    tf_time_major_reverse,
)

MODULES = (audiolm_attn_out_unused, tf_time_major_reverse, gemma2_flex_no_transpose, ssd_prefix_hit_paged_rows)
OK, UNSURE = ("✓", ()), ("?", ())
FLIPS = ("✗", ("roll-not-undone", "roll-not-undone"))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (audiolm_attn_out_unused, ""): [UNSURE, UNSURE],
    # (lib14: ? -> !: the attention's output projection, its result dropped, is projection-bypassed)
    (audiolm_attn_out_unused, "attn-out-unused"): [("!", ("projection-bypassed",))] * 2,
    (tf_time_major_reverse, ""): [OK, UNSURE],
    (tf_time_major_reverse, "reverse-batch-axis"): [FLIPS, FLIPS],
    (gemma2_flex_no_transpose, ""): [OK, UNSURE],
    (gemma2_flex_no_transpose, "flex-no-transpose"): [("✗", ("mixed-axis",)), UNSURE],
    (ssd_prefix_hit_paged_rows, ""): [UNSURE, UNSURE],
    (ssd_prefix_hit_paged_rows, "contiguous-cache-rows"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(tf_time_major_reverse, "reverse-batch-axis")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)


def test_the_bidirectional_wrapper_measured_on_its_values_is_no_causal_leak():
    """The CLI measures the dependency contracts: tensorflow #39635's correct wrapper was ``✗ causal-mask-leaks``
    there on f389eb2 (its backward half's causal mask runs on reversed tokens); now ``✓``, the causal contract
    not claimed, and its bug still ``✗`` (the backward output reversed along the batch)."""
    import torch

    import shapetrace
    from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN

    marks = {}
    for bug in ("", "reverse-batch-axis"):
        model, inputs = tf_time_major_reverse.build(bug)
        with torch.no_grad(), shapetrace.trace(dims=tf_time_major_reverse.DIMS[0], dependencies=True) as t:
            model(*inputs)
        report = t.report()
        marks[bug] = report.verdict.mark, [d.kind for d in report.diagnostics if d.severity == "error"]
        if not bug:
            assert report.contracts[:2] == [BATCH, OWN_TOKEN] and CAUSAL not in report.contracts
    assert marks == {"": ("✓", []), "reverse-batch-axis": ("✗", ["roll-not-undone", "roll-not-undone"])}
