"""A twenty-sixth round of files after public bug reports (tests/corpus/reports26; each file's docstring cites
its report), traced at their DIMS and, for one row, at B = T = H = 4 (the other rows' equal-size column was
measured once and is kept in the table: the suite's time is a budget), first sight recorded on eefe532 (the
files committed, 021ddce, before any engine change).

* mlxvlm_chunked_mrope_positions — Blaizzy/mlx-vlm issue #1737 / pull request #1741: a prompt prefilled in
  chunks rotates each later chunk at the prompt's first M-RoPE positions (``position_ids[..., :L]``), not at
  its own window (``[..., offset:offset + L]``), while its keys are appended after the cache;
* sglang_mrope_flat_positions — sgl-project/sglang issue #35345: M-RoPE ids ``[3, T]`` handed to a 1-D fused
  rope kernel that reads ``positions_ptr + token``: ``positions.reshape(-1)[:T]``, the temporal row alone;
* functional_transformer_heads_summed — awf/functional-transformer issue #8: each head's values projected to
  the full width and the heads' outputs summed into the embeddings, no concatenation, no output projection;
* vllm_gemma4_image_window — vllm-project/vllm pull request #47217: an image longer than the sliding window
  loses its bidirectional block on the sliding layers (causal only) instead of the block clamped to the window.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims DIMS``, which also measures the dependency contracts, in the last column).
No finding (error or warning) on any row:

==================================  ======================  ========================  ======================
file                                variant                 round_outcome eefe532     CLI on eefe532
==================================  ======================  ========================  ======================
mlxvlm_chunked_mrope_positions      (correct)               ? 37 of 48 / ? 27 of 49   ? 43 of 54
mlxvlm_chunked_mrope_positions      prompt-start-positions  ? 16 of 48 / ? 0 of 49    ? 16 of 54
sglang_mrope_flat_positions         (correct)               ? 18 of 34 / ? 18 of 34   ? 18 of 38
sglang_mrope_flat_positions         flat-positions          **✓ all 26 / ✓ all 26**   **✓ all 30**
functional_transformer_heads_summed (correct)               ? 13 of 35 / ? 13 of 35   ? 13 of 35
functional_transformer_heads_summed heads-summed            ? 21 of 33 / ? 21 of 33   ? 21 of 33
vllm_gemma4_image_window            (correct)               ? 26 of 29 / ? 0 of 37    ? 26 of 29
vllm_gemma4_image_window            long-image-dropped      ? 22 of 25 / ? 0 of 31    ? 22 of 25
==================================  ======================  ========================  ======================

At first sight the 4 correct files were ✓ 0, ? 4, ✗ 0; the 4 bugs ✗ 0, ? 3, ✓ 1: a check mark on a bug.

Fixed (d2746bb): sglang's ``flat-positions`` cut ``reshape(-1)[:T]`` of the ``[3, T]`` ids was named T by the
size read from the queries' token axis (infer/sizes.py) and counted checked on the rotary table's values
(value_checked.py); a cut of a merge of unnamed axes is now proven by neither: ``? 25 of 26`` (round_outcome,
both sizes), ``? 29 of 30`` (CLI), the cut (``#12 __getitem__``) named as not checked. Written as
``positions[0]`` (the same values, no merge) it would still be ✓: the temporal row alone is a correct 1-D rope
for text, and only the sections (values) tell M-RoPE from it; a known miss.

Fixed (f41d13a): mlxvlm's ``prompt-start-positions`` chunk, its first token rotated at position 0
(cos 1, sin 0 on every feature; the others at 1, 2, 3) and joined along T after the 6 entries of a cache
handed in, is now ``✗ rotary-position-restarts`` at DIMS (that rule read only rotations of one token, all at
position 0). Entries made in the run before the rotated ones (EVA's unrotated class token) are no cache.

Open (a later round):

* sglang_mrope_flat_positions (bug): ``?`` rather than ``✗``: the ids' row axis (3) is unnamed; a rule that
  knew a ``[3, T]`` position input as M-RoPE's could say the rows past the first never reach the table.
* mlxvlm_chunked_mrope_positions: its correct file stays ``?`` (the grid positions are not read:
  rotary-grid-positions); its bug at equal sizes stays ``?`` (T named by size alone decides nothing). A chunk
  whose first token is at position ``p > 0`` but not at the cache's length is not read (only position 0).
* functional_transformer_heads_summed (bug): ``?``: each head's ``L x Dm`` values summed over heads is a valid
  (if unusual) parameterisation (sum of per-head out-projections, rank ``Dm`` instead of ``Dk``); the per-head
  linear maps of an input with no batch axis stay unnamed (``#1 linear``). A twin by values; a known miss.
* vllm_gemma4_image_window (bug): ``?``: the mask's meaning is only in its values (which image block is
  bidirectional); the ``stack`` of per-request masks is unnamed. A known miss.
* the equal-size column is ``?`` throughout (nothing is named by size alone).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports26 import (
    functional_transformer_heads_summed,
    mlxvlm_chunked_mrope_positions,
    sglang_mrope_flat_positions,
    vllm_gemma4_image_window,
)

MODULES = (mlxvlm_chunked_mrope_positions, sglang_mrope_flat_positions, functional_transformer_heads_summed,
           vllm_gemma4_image_window)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (mlxvlm_chunked_mrope_positions, ""): [UNSURE, UNSURE],
    (mlxvlm_chunked_mrope_positions, "prompt-start-positions"): [("✗", ("rotary-position-restarts",)), UNSURE],
    (sglang_mrope_flat_positions, ""): [UNSURE, UNSURE],
    (sglang_mrope_flat_positions, "flat-positions"): [UNSURE, UNSURE],
    (functional_transformer_heads_summed, ""): [UNSURE, UNSURE],
    (functional_transformer_heads_summed, "heads-summed"): [UNSURE, UNSURE],
    (vllm_gemma4_image_window, ""): [UNSURE, UNSURE],
    (vllm_gemma4_image_window, "long-image-dropped"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(sglang_mrope_flat_positions, "flat-positions")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED)
