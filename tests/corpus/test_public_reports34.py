"""A thirty-fourth round of files after public bug reports (tests/corpus/reports34; each file's docstring cites
its report), traced at their DIMS and, for the rows in ``EQUAL_TESTED``, at equal sizes too (B = T = H = 4, or
the module's own ``EQUAL`` reading; the other rows' equal-size outcomes were measured once and are kept in the
table: the suite's time is a budget). First sight recorded on d107288 (main at 51f5266 plus the round's files).

* omdet_ela_batch_first — om-ai-lab/OmDet issue #19: OmDet-Turbo's ELA encoder layer built its
  ``nn.MultiheadAttention`` sequence-first (no ``batch_first=True``) for ``(batch, h*w, channels)`` tokens;
* vllm_fork_sdpa_transpose — HabanaAI/vllm-fork pull request #1218: vLLM's vision ``MultiHeadAttention`` lost
  the ``transpose(1, 2)`` before and after ``F.scaled_dot_product_attention``, which then attended over the
  heads;
* text_cls_view_heads — 649453932/Chinese-Text-Classification-Pytorch issue #10: the Transformer classifier
  split the heads with ``view(batch * heads, -1, d_k)`` and merged them with ``view(batch, -1, D)``, no
  transpose either way;
* quantizable_mha_batch_first — pytorch/pytorch issue #67651 (open; unchanged in torch 2.13): the quantizable
  ``MultiheadAttention`` with ``batch_first=True`` merges ``(B*H, T, d_k)`` with ``view(B, T, D)``.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also measures the dependency contracts, in the last column).

===========================  ========================  ================================  =========================
file                         variant                   round_outcome d107288             CLI on d107288
===========================  ========================  ================================  =========================
omdet_ela_batch_first        (correct)                 ? / ?                             ? 31 of 41 (sin-cos table)
omdet_ela_batch_first        sequence-first-attention  ✗ attends-over-batch /            ✗ attends-over-batch
                                                       ✗ attends-over-batch
vllm_fork_sdpa_transpose     (correct)                 ✓ / ?                             ✓ all 17
vllm_fork_sdpa_transpose     no-transpose              ✗ sdpa-layout / ?                 ✗ sdpa-layout
text_cls_view_heads          (correct)                 ? / ?                             ? 26 of 27 (#31 linear)
text_cls_view_heads          view-heads                ✗ mixed-axis x3,                  ✗ 4 errors (the same)
                                                       projection-over-tokens /
                                                       ✗ attends-over-heads
quantizable_mha_batch_first  (correct)                 ✓ / ?                             ✓ all 21
quantizable_mha_batch_first  merge-view-batch-first    ✗ mixed-axis / ✗ broadcast-mismatch  ✗ mixed-axis
===========================  ========================  ================================  =========================

At first sight the 4 correct files were (round_outcome at DIMS) ✓ 2, ? 2, ✗ 0; the 4 bugs ✗ 4, ? 0, ✓ 0 (the CLI
the same). No engine change alters a row of this table.

Engine change of the round (68484023; tests/engine/test_grids.py, 2 of 3 fail on 51f5266): ``torch.meshgrid`` had no
entry, so its grids were unnamed; engine/grids names each grid axis after the vector it walks (``"ij"`` in the
operands' order, ``"xy"`` with the first two swapped). OmDet's sin-cos table stays unnamed all the same: it is
built from ``torch.arange(int(w))``, and ``int()`` of a size read from an axis is a plain int (Python's
``int()`` of an int subclass drops the subclass; keeping it would need an ``__int__`` returning a non-int,
which Python deprecates), so the counts carry no axis.

After the round (this module): correct ✓ 2, ? 2, ✗ 0; bugs ✗ 4, ? 0, ✓ 0.

Open (why each stays ``?``):

* omdet_ela_batch_first (correct): the position table (``arange(int(w))``, above) is unnamed, so the ``add``
  of it to the queries and keys is not checked. Were it named, it would read ``Wp*Hp`` against the tokens'
  ``Hp*Wp``: RT-DETR's ``meshgrid(arange(w), arange(h), indexing="ij")`` lays the table out width-major while
  ``flatten(2)`` lays the tokens out row-major, a real slip for non-square maps that huggingface/transformers
  pull request #41380 fixed in its RT-DETR port (the file keeps OmDet's code as its issue fixed it).
* text_cls_view_heads (correct): the classifier ``fc1`` projects the flattened ``T*D`` (the repository's
  ``out.view(out.size(0), -1)`` over a fixed ``pad_size``) to 10 classes, an axis no name has: a projection
  over tokens and features together is a design the trace cannot tell from a slip, so it is left unjudged.
* vllm_fork_sdpa_transpose ``no-transpose`` at B = T = H = 4: ``(B, T, H, d_k)`` fed to SDPA reads the same
  as ``(B, H, T, d_k)`` when T = H, and equal sizes never decide a name.

Round 49 (tests/corpus/test_public_round49.py): text_cls_view_heads's correct file is ``✓`` at its DIMS (was ``?``):
its one
unchecked op was a module's ``linear`` whose new width is a declared name's size too (left unnamed), and a
projection by a module's own weight is now checked on the axes it reads and keeps, whatever its width's name
(engine/verdict ``_weight_rows``). At equal sizes it stays ``?``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports34 import (
    omdet_ela_batch_first,
    quantizable_mha_batch_first,
    text_cls_view_heads,
    vllm_fork_sdpa_transpose,
)

MODULES = (omdet_ela_batch_first, vllm_fork_sdpa_transpose, text_cls_view_heads, quantizable_mha_batch_first)
UNSURE, SURE = ("?", ()), ("✓", ())
OVER_BATCH = ("✗", ("attends-over-batch",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then equal sizes
EXPECTED = {
    (omdet_ela_batch_first, ""): [UNSURE, UNSURE],
    (omdet_ela_batch_first, "sequence-first-attention"): [OVER_BATCH, OVER_BATCH],
    (vllm_fork_sdpa_transpose, ""): [SURE, UNSURE],
    (vllm_fork_sdpa_transpose, "no-transpose"): [("✗", ("sdpa-layout",)), UNSURE],
    (text_cls_view_heads, ""): [("✓", ()), UNSURE],   # (distinct: ? -> ✓, round 49: weight rows)
    (text_cls_view_heads, "view-heads"): [
        ("✗", ("mixed-axis", "mixed-axis", "mixed-axis", "projection-over-tokens")),
        ("✗", ("attends-over-heads",))],
    (quantizable_mha_batch_first, ""): [SURE, UNSURE],
    (quantizable_mha_batch_first, "merge-view-batch-first"): [("✗", ("mixed-axis",)),
                                                              ("✗", ("broadcast-mismatch",))],
}
#: the rows also traced at equal sizes (no fix of the round changed a row: none)
EQUAL_TESTED = frozenset()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
