"""A sixty-fifth round of public-style files (tests/corpus/public65: attention outside text and images, from projects
not yet in the corpus: a graph transformer on an edge list, a tabular foundation model attending over features and
then over items, retrieval attention over the nearest training rows, a recommender's pointwise (softmax-free)
attention on jagged histories, a weather model's cross-attention over physical variables), traced at distinct
sizes and at equal sizes, first sight recorded on 06b75e7b (main plus the files; other rounds' folders were being
written in the same checkout at the time):

* pyg_transformer_conv — pyg-team/pytorch_geometric ``TransformerConv`` (``concat=True``, ``beta=True``) with
  ``propagate``'s ``index_select`` gathers (``query_i`` by the target row, ``key_j``/``value_j`` by the source row),
  ``utils.softmax`` (``scatter_reduce_(amax)``, ``exp``, ``scatter_add_``) and ``aggr="add"``; bugs
  ``softmax-by-source`` (the softmax grouped by ``edge_index[0]``), ``query-from-source`` (``query_j``),
  ``aggregate-to-source`` (messages scattered into ``edge_index[0]``); the graph's nodes named ``T``;
* tabpfn_per_feature — PriorLabs/TabPFN v2 ``PerFeatureEncoderLayer`` (state ``(B, items, feature blocks, D)``,
  attention between features, then between items through ``transpose(1, 2)``: train items attend train items, test
  items attend train items) and ``MultiHeadAttention`` (``einsum("... s, j h d s -> ... j h d")`` heads, ``einsum("b
  q h d, b k h d -> b q k h")``, ``softmax(dim=2)``); bugs ``softmax-over-heads`` (``dim=-1``),
  ``train-items-no-transpose``, ``items-back-reshape`` (``.reshape(B, n_test, F, D)`` for ``.transpose(1, 2)``),
  ``test-keys-include-test`` (the test items attend all items); items named ``T``, feature blocks ``N``;
* tabr_retrieval — yandex-research/tabular-dl-tabr ``Model.forward`` (kNN context by ``cdist``/``topk`` for
  ``faiss``, the row's own hit pushed out with ``inf`` in training, ``candidate_k[context_idx]``, negative squared L2
  similarities, ``softmax(dim=-1)`` over each row's context, values = label embedding + ``T(k - context_k)``); bugs
  ``softmax-over-batch`` (``dim=0``), ``self-not-excluded`` (each row retrieves itself); rows ``B``, candidates
  ``N``, context ``S``;
* hstu_pointwise — meta-recsys/generative-recommenders ``SequentialTransductionUnitJagged`` /
  ``_hstu_attention_maybe_from_cache`` (jagged ``(sum of lengths, D)`` padded by a length mask, one ``mm`` and
  ``split`` into ``u, v, q, k``, ``einsum("bnhd,bmhd->bhnm")`` plus a Toeplitz ``RelativePositionalBias``,
  ``silu(qk) / n`` times ``1.0 - triu(1)``, ``einsum("bhnm,bmhd->bnhd")``, back to jagged); bugs
  ``mask-not-inverted``, ``value-einsum-transposed`` (``"bhmn,bmhd->bnhd"``), ``heads-merge-no-transpose``
  (``"bhnm,bmhd->bhnd"`` then ``reshape(B, n, H * d)``);
* climax_variable_agg — microsoft/ClimaX ``forward_encoder`` / ``aggregate_variables`` (a ``PatchEmbed`` per
  variable, ``stack`` to ``(B, V, L, D)``, ``einsum("bvld->blvd")``, ``flatten(0, 1)``, one learnt query through
  ``nn.MultiheadAttention(batch_first=True)`` over the variables of each patch, ``unflatten(0, (b, l))``); bugs
  ``vars-reshape-no-permute`` (``reshape(b * l, -1, d)`` without the einsum), ``einsum-patch-outer``
  (``"bvld->lbvd"`` with the ``(b, l)`` unflatten); patches ``T``, variables ``S``.

==================== ======================== ==========================================================
file                 variant                  first sight (DIMS | equal; with dependencies where it differs)
==================== ======================== ==========================================================
pyg_transformer_conv (correct)                ? | ?
pyg_transformer_conv softmax-by-source        ? | ?
pyg_transformer_conv query-from-source        ? | ?
pyg_transformer_conv aggregate-to-source      ? | ?
tabpfn_per_feature   (correct)                ? | ?
tabpfn_per_feature   softmax-over-heads       ✗ softmax-wrong-axis (both)
tabpfn_per_feature   train-items-no-transpose ? | ?
tabpfn_per_feature   items-back-reshape       ✗ mixed-axis (both)
tabpfn_per_feature   test-keys-include-test   ? | ?
tabr_retrieval       (correct)                ? | ?   (checked 0 of 37 ops)
tabr_retrieval       softmax-over-batch       ? | ?
tabr_retrieval       self-not-excluded        ? | ?
hstu_pointwise       (correct)                ? | ?   (DIMS: "nothing was checked")
hstu_pointwise       mask-not-inverted        ? | ?
hstu_pointwise       value-einsum-transposed  ? | ?
hstu_pointwise       heads-merge-no-transpose ? | ✗ projection-over-tokens;  with dependencies:
                                              ✗ heads-mix | ✗ projection-over-tokens, heads-mix
climax_variable_agg  (correct)                ! tokens-merged-with-features (both; false)
climax_variable_agg  vars-reshape-no-permute  ? | ✗ mixed-axis ×2
climax_variable_agg  einsum-patch-outer       ✗ broadcast-mismatch, tokens-merged-with-features |
                                              ! tokens-merged-with-features (only the false warning)
==================== ======================== ==========================================================

No bug gets ``✓`` (nearly everything is ``?``: the names do not reach the ops the bugs are in). One correct file gets
a false ``!``: ClimaX's ``tokens-merged-with-features`` at view #34 inside ``nn.MultiheadAttention`` ("turns [3,
B·Wp=12, D=32] into [3, B·Wp·H=48, d_k=8]: axis 1 flattens B and Wp and H into one axis, so each of its entries is a
(batch entry, token, head) tuple"): the aggregation's batch is ``B·L`` by design (one query per patch, the
variables are its sequence) and folding the heads into that batch is ``nn.MultiheadAttention``'s own layout; it is
bound with ``warned=`` below only so that the round records the present outcome, not because the warning is honest.
Where the axes stay unnamed: PyG's ``scatter_add_``/``scatter_reduce_`` (the edges' messages into the nodes) are
shown as no-ops "[T, H] -> [T, H]; returns its input itself", and no gather or scatter index is compared
(``query_i`` is labelled ``T[index]`` whether it was gathered by ``dst`` or, in ``query-from-source``, by ``src``,
``key_j`` ``T[src]``; the edges' axis is never seen as per-edge pairs of nodes); TabPFN's heads come
from a weight ``(1, H, d_k, D)`` through an einsum, not from a view of ``D``, so the ``4`` and ``8`` axes stay
unnamed (``not checked: #2 einsum, #3 squeeze, ...``) and ``train-items-no-transpose``, the item attention run over
the features for the train rows, is ``?``; TabR's inputs are ``(rows, features)`` matrices and nothing is named
(``checked 0 of 37``; only ``label_encoder``'s output gets ``D``); HSTU's jagged ``(10, 32)`` input names nothing at
DIMS (the CLI: "The sizes given with --dims (B=2 T=6 D=32 H=4) named no input tensor; the script's tensors have
axes of sizes 1, 2, 3, 4, 6, 8, 10, 11, 16, 17, 32, 96, …", sizes 2, 4, 6 and 32 among them), and at equal sizes
its ``(n, n)`` causal mask is named ``[B, T]`` and the jagged gather ``dense[lengths mask]`` gets the note
``batch-picked`` ("picks one entry of [4, B=4, 32]'s batch B (4 entries) and drops the others"), false: it keeps
every real row of every history. ClimaX's ``vars-reshape-no-permute`` at DIMS is ``?``: reshape #16 ``[B=2, 3,
Wp=6, D=32] -> [12, Wp%3=3, D=32]`` leaves axis 0 (B, the variables and Wp/3 mixed) unnamed and the attention runs
over ``Wp%3``; ``einsum-patch-outer``'s bad unflatten (#50, ``[Wp·B=12, D] -> [Wp/3=2, Wp%3·B=6, D]``) gets only the
note ``tokens-regrouped-with-batch`` ("That is how windowed attention (Swin's windows, local chunks) batches its
windows"), the error coming at the later lead-time ``add`` #54.

Since first sight (tests/engine/test_round63_fixes.py): a fold of the batch, tokens and heads (``B·Wp·H``,
``nn.MultiheadAttention``'s ``bsz * num_heads`` over a batch of rows) that only batched products read, kept through
its reorders and softmax until it is undone, is a batch (``rules/row_folds._leading_batch``, ``_kept_until_undone``):
ClimaX's correct file is ``?`` at both sizes and
``einsum-patch-outer`` keeps only its own ``✗ broadcast-mismatch`` (``?`` at equal sizes). HSTU's
``heads-merge-no-transpose`` at equal sizes is ``?`` (its ``projection-over-tokens`` there came from the ``(n, n)``
mask's names; with dependencies ``✗ heads-mix`` at both sizes).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public65 import (
    climax_variable_agg,
    hstu_pointwise,
    pyg_transformer_conv,
    tabpfn_per_feature,
    tabr_retrieval,
)

MODULES = (pyg_transformer_conv, tabpfn_per_feature, tabr_retrieval, hstu_pointwise, climax_variable_agg)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (pyg_transformer_conv, ""): [UNSURE, UNSURE],
    (pyg_transformer_conv, "softmax-by-source"): [UNSURE, UNSURE],
    (pyg_transformer_conv, "query-from-source"): [UNSURE, UNSURE],
    (pyg_transformer_conv, "aggregate-to-source"): [UNSURE, UNSURE],
    (tabpfn_per_feature, ""): [UNSURE, UNSURE],
    (tabpfn_per_feature, "softmax-over-heads"): [("✗", ("softmax-wrong-axis",))] * 2,
    (tabpfn_per_feature, "train-items-no-transpose"): [UNSURE, UNSURE],
    (tabpfn_per_feature, "items-back-reshape"): [("✗", ("mixed-axis",))] * 2,
    (tabpfn_per_feature, "test-keys-include-test"): [UNSURE, UNSURE],
    (tabr_retrieval, ""): [UNSURE, UNSURE],
    (tabr_retrieval, "softmax-over-batch"): [UNSURE, UNSURE],
    (tabr_retrieval, "self-not-excluded"): [UNSURE, UNSURE],
    (hstu_pointwise, ""): [UNSURE, UNSURE],
    (hstu_pointwise, "mask-not-inverted"): [UNSURE, UNSURE],
    (hstu_pointwise, "value-einsum-transposed"): [UNSURE, UNSURE],
    (hstu_pointwise, "heads-merge-no-transpose"): [UNSURE, UNSURE],   # (✗ heads-mix with dependencies)
    (climax_variable_agg, ""): [UNSURE, UNSURE],   # (! at first sight: see the docstring)
    (climax_variable_agg, "vars-reshape-no-permute"): [UNSURE, ("✗", ("mixed-axis", "mixed-axis"))],
    (climax_variable_agg, "einsum-patch-outer"): [("✗", ("broadcast-mismatch",)), UNSURE],
}

#: bugs that keep ``✓`` at DIMS: none this round
MISSED: set = set()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
