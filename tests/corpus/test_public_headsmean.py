"""A round of graph attention whose output layer averages its heads on purpose (tests/corpus/headsmean:
pytorch-GAT's PPI ``GAT``, dense attention over N nodes, two ``GATLayerImp2`` layers, the hidden one's heads
concatenated and the output one's averaged by ``mean(dim=self.head_dim)``; torch_geometric's ``GATConv(concat=
False)`` on an edge list, its scatter softmax over each target's in-edges and ``out.mean(dim=1)``; DGL's
``GATConv`` as examples/pytorch/gat stacks it, a batch of graphs, the hidden heads ``flatten``\\ ed and the output
heads averaged by ``h.mean(1)``), traced at distinct sizes and at equal sizes, first sight recorded before any
engine change (on 32d4522 + the files, commit 38a0fa1).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS, run on 38a0fa1: the same marks as the distinct column but where a note says otherwise):

============= ======================= ============================== ============================== ===========
file          variant                 distinct (first sight)         equal (first sight)            after fixes
============= ======================= ============================== ============================== ===========
gat_ppi_dense (correct)               ✗ reduction-over-wrong-axis    ✗ reduction-over-wrong-axis    ! | !
gat_ppi_dense hidden-heads-summed     ✗ reduction-over-wrong-axis    ✗ reduction-over-wrong-axis    ✗ | ✗
gat_ppi_dense mean-over-nodes         ✓ (CLI: ? 22 of 24, note 1)    ✓                              ? | ?
pyg_gatconv   (correct)               ? 8 of 15                      ?                              ? | ?
pyg_gatconv   lin-view-channels-first ✗ reduction-over-wrong-axis ×2 ✗ reduction-over-wrong-axis ×2 ✗ | ✗
pyg_gatconv   mean-over-nodes         ? 8 of 15                      ?                              ? | ?
dgl_gat       (correct)               ? 9 of 30                      ?                              ? | ?
dgl_gat       hidden-heads-meaned     ? 9 of 30                      ?                              ? | ?
dgl_gat       mean-over-nodes         ? 9 of 30                      ?                              ? | ?
============= ======================= ============================== ============================== ===========

At first sight (distinct sizes): the 3 correct files ✓ 0, ? 2, ✗ 1 (GAT's averaged output layer); the 6 bugs
✗ 2, ? 3, ✓ 1 (GAT's mean over the nodes). After the fixes: correct ✓ 0, ! 1, ? 2, ✗ 0 (none at equal sizes
either); bugs ✗ 2, ? 4, ✓ 0.

Note 1: the CLI traces the whole script, the adjacency's ``adj.T`` and ``masked_fill`` of ``build`` included, whose
``(N, N)`` axes nothing names; ``round_outcome`` builds outside the trace.

The fixes (each test fails on 32d4522):

* engine/rules/averaged_heads ``averaged_heads``: a ``mean`` along the heads alone of the heads' outputs (what a
  product weighing values made, its result carrying that heads axis) is the warning ``heads-averaged``: it says
  what it computes and that it is right only where the model means to average its heads (GAT's output layer),
  no longer the error ``reduction-over-wrong-axis``, which a correct GAT got. A ``sum`` over the heads (nanoGPT's
  ``sum-heads`` bug, ``hidden-heads-summed`` here: a sum scales the average by H, which no averaged ensemble does)
  and a mean of q, k or v over the heads before attention stay errors (tests/engine/test_averaged_heads.py).
* engine/rules/averaged_heads ``pooled_per_head``: a ``mean`` along the tokens alone of the heads' outputs, the
  heads and their features kept apart, is the note ``pooled-per-head``, which keeps the verdict at ``?``: a readout
  per head computes exactly that, and so does GAT's ``mean(dim=1)`` written ``mean(dim=0)`` (``mean-over-nodes``,
  which was ``✓``) (tests/engine/test_averaged_heads.py).

Why each stays ``?`` or ``!``:

* gat_ppi_dense (correct): ``!`` by design of the first fix: the trace of an average over the heads is the same
  whether the model means it (GAT) or means to lay the heads side by side; the warning says so.
* gat_ppi_dense ``mean-over-nodes``: ``?`` by design of the second fix (a readout per head has the same trace).
* pyg_gatconv (correct, ``mean-over-nodes``): the messages ``x.index_select(0, src)`` along the edges and the
  scatter softmax's ``index_reduce``/``index_add`` back onto the nodes leave the edge axis ``E`` unnamed (an index
  read from ``edge_index``, not from a named axis), so the heads' outputs after ``index_add`` are unnamed and no
  rule reads the final mean. ``lin-view-channels-first`` is found where the per-head scores ``(x *
  att_src).sum(-1)`` run along the axis the swapped view names H.
* dgl_gat (all three): the same edge-list gathers and scatters leave the outputs unnamed (9 of 30 checked); the
  hidden layer's heads averaged where the model flattens them (``hidden-heads-meaned``) would, named, be the
  warning ``heads-averaged`` at best: a mean over the heads reads the same whether intended or not.
"""

from __future__ import annotations

from tests.corpus.headsmean import dgl_gat, gat_ppi_dense, pyg_gatconv
from tests.corpus.helpers import round_tests

MODULES = (gat_ppi_dense, pyg_gatconv, dgl_gat)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (gat_ppi_dense, ""): [("!", ("heads-averaged",))] * 2,          # (both: ✗ -> ! after the averaged-heads fix)
    (gat_ppi_dense, "hidden-heads-summed"): [("✗", ("reduction-over-wrong-axis",))] * 2,
    (gat_ppi_dense, "mean-over-nodes"): [UNSURE, UNSURE],           # (both: ✓ -> ? after the pooled-per-head fix)
    (pyg_gatconv, ""): [UNSURE, UNSURE],
    (pyg_gatconv, "lin-view-channels-first"): [("✗", ("reduction-over-wrong-axis",) * 2)] * 2,
    (pyg_gatconv, "mean-over-nodes"): [UNSURE, UNSURE],
    (dgl_gat, ""): [UNSURE, UNSURE],
    (dgl_gat, "hidden-heads-meaned"): [UNSURE, UNSURE],
    (dgl_gat, "mean-over-nodes"): [UNSURE, UNSURE],
}

#: GAT's output layer (heads averaged on purpose) keeps the warning heads-averaged: see "Why each stays" above
#: only the rows the fixes changed at equal sizes are traced there too (the suite's time is a budget)
EQUAL_TESTED = {(gat_ppi_dense, ""), (gat_ppi_dense, "mean-over-nodes")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED, warned={(gat_ppi_dense, "")})
