"""A thirty-eighth round of files after public bug reports (tests/corpus/reports38; each file's docstring cites
its report), traced at their DIMS and at equal sizes (B = T = H = 4, or the file's own ``EQUAL``). First sight
recorded on dd823467 (main, plus the round's files).

* former_mask_diagonal — pbloem/former issue #10: the causal mask's ``triu_indices(t, t, offset=0)`` masks the
  diagonal too (no token sees itself; the first query's row all ``-inf``), in former's bmm attention with the heads
  folded ``view(b * h, t, s)``;
* qanet_heads_view_unpermuted — hackiey/QAnet-pytorch issue #2: a per-head loop's ``[H, B, T, d]`` buffer
  concatenated with ``heads.view(batch_size, l, -1)`` where ``permute(1, 2, 0, 3)`` must come first;
* cmos_window_reverse_channels — ByChelsea/CMOS issue #4: ``window_reverse`` permutes the channels-first windows
  into ``x`` and then views ``windows`` (channels-first read as channels-last);
* diffposetalk_pe_index — DiffPoseTalk/DiffPoseTalk issue #20: ``self.pe[:, x.shape[1], :]`` (the encoding of the
  single position T, added to every frame) for the slice ``self.pe[:, :x.shape[1], :]``;
* nnformer_relative_coords — 282857341/nnFormer pull request #88: the 3-D relative position index built with the
  strides ``3 * ws[1] - 1`` and ``2 * ws[1] - 1`` (19 of the 27 rows of a 2 x 2 x 2 window's table read, distinct
  offsets sharing one bias).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
everywhere in this round; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, in the last column).

============================  ===============  =====================================  ============================
file                          variant          round_outcome                          CLI at DIMS
============================  ===============  =====================================  ============================
former_mask_diagonal          (correct)        ? / ?                                  ? 31 of 33
former_mask_diagonal          mask-diagonal    ✗ nan-rows / ✗ nan-rows                ✗ nan-rows (#24)
qanet_heads_view_unpermuted   (correct)        ? / ?                                  ? 24 of 49
qanet_heads_view_unpermuted   view-unpermuted  ✗ mixed-axis / ✗ projection-over-       ✗ mixed-axis (#47)
                                               tokens, broadcast-mismatch
cmos_window_reverse_channels  (correct)        ✓ / ✓                                  ✓ (a true note, below)
cmos_window_reverse_channels  view-windows     ✗ mixed-axis / ✗ mixed-axis ×2         ✗ mixed-axis (#34)
diffposetalk_pe_index         (correct)        ? / ?                                  ? 43 of 43, mask not proven
diffposetalk_pe_index         pe-index         ? / ?                                  ? 43 of 43, mask not proven
nnformer_relative_coords      (correct)        ? / ?                                  ? 18 of 24
nnformer_relative_coords      index-strides    ? / ?                                  ? 18 of 24
============================  ===============  =====================================  ============================

No bug gets ``✓`` and no correct file gets ``✗`` anywhere; no note or warning on correct code says something false
(``cmos_window_reverse_channels``'s ``i note tokens-regrouped-with-batch`` at #7 describes the window partition
as what it is).

Fixed since (tests/engine/test_picked_at_length.py): ``diffposetalk_pe_index``'s index-for-slice read one entry
of the table and broadcast it over the frames, and nothing judged it (the bug's ``?`` came only from the audio
alignment mask, #43; without its cross-attention the file would have been ``✓``). The pick's integer is a length
read from the very tensor the entry is added to (shapetrace/engine/lookups.py ``picked_at_length``): now ``!
picked-at-length`` at both sizes.

Open (for the engine, not fixed in this round):

* ``nnformer_relative_coords``: the index buffer's values (which offsets share a row) are not judged; the table
  read ``table[index.view(-1)]`` (#30-#33) has unnamed axes, so both variants read ``? 18 of 24``;
* ``qanet_heads_view_unpermuted`` (correct): 24 of 49 ops checked (the per-head ``heads[i] = ...`` writes into a
  ``torch.zeros`` buffer and the ``[B, T]`` float padding mask stay unnamed);
* ``cmos_window_reverse_channels`` (bug): the ``mixed-axis`` message's fix hint ("Split the features where they
  are: view(B, T, H, d_k), then transpose(1, 2)") is the attention-heads hint, not the window's (view the permuted
  ``x``).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports38 import (
    cmos_window_reverse_channels,
    diffposetalk_pe_index,
    former_mask_diagonal,
    nnformer_relative_coords,
    qanet_heads_view_unpermuted,
)

MODULES = (former_mask_diagonal, qanet_heads_view_unpermuted, cmos_window_reverse_channels, diffposetalk_pe_index,
           nnformer_relative_coords)
UNSURE, SURE = ("?", ()), ("✓", ())
NAN_ROWS = ("✗", ("nan-rows",))
MIXED = ("✗", ("mixed-axis",))
MIXED_TWICE = ("✗", ("mixed-axis", "mixed-axis"))
OVER_TOKENS = ("✗", ("projection-over-tokens", "broadcast-mismatch"))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (former_mask_diagonal, ""): [UNSURE, UNSURE],
    (former_mask_diagonal, "mask-diagonal"): [NAN_ROWS, NAN_ROWS],
    (qanet_heads_view_unpermuted, ""): [UNSURE, UNSURE],
    (qanet_heads_view_unpermuted, "view-unpermuted"): [MIXED, OVER_TOKENS],
    (cmos_window_reverse_channels, ""): [SURE, SURE],
    (cmos_window_reverse_channels, "view-windows"): [MIXED, MIXED_TWICE],
    (diffposetalk_pe_index, ""): [UNSURE, UNSURE],
    (diffposetalk_pe_index, "pe-index"): [("!", ("picked-at-length",))] * 2,
    (nnformer_relative_coords, ""): [UNSURE, UNSURE],
    (nnformer_relative_coords, "index-strides"): [UNSURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
