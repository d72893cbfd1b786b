"""A fifty-ninth round of public-style files (tests/corpus/public59: attention outside LLM text, from projects not yet
in the corpus: the VQGAN / latent-diffusion autoencoder's ``AttnBlock``, CCNet's criss-cross attention, SuperGlue's
attentional GNN, LoFTR's linear attention, VITS's windowed relative attention), traced at distinct sizes and at
equal sizes, first sight recorded on 0c703cb0 (main plus the files; other helpers' uncommitted rounds in the tree):

* taming_attnblock — CompVis/taming-transformers ``AttnBlock`` (single head over a flattened ``h x w`` map,
  ``bmm(q, k)`` with ``q`` permuted to ``(b, hw, c)``, ``softmax(dim=2)``, ``bmm(v, w_.permute(0, 2, 1))``); bugs
  ``no-weight-transpose``, ``softmax-over-queries`` (``dim=1``), ``keys-column-major`` (``k.transpose(2, 3)
  .reshape(b, c, h*w)``: keys flattened width-first against row-major queries and values);
* ccnet_criss_cross — Serge-weihao/CCNet-Pure-Pytorch ``CC_module`` / ``INF`` (column branch folded ``(B·W, ·, H)``,
  row branch ``(B·H, ·, W)``, ``-inf`` diagonal on the column energies, one softmax over ``cat([energy_H,
  energy_W], 3)``); bugs ``att-h-not-permuted-back``, ``query-w-from-h-permute`` (the row queries folded with the
  column branch's permute), ``no-inf-diagonal``;
* superglue_gnn — magicleap/SuperGluePretrainedNetwork ``attention`` / ``MultiHeadedAttention`` /
  ``AttentionalPropagation`` / ``AttentionalGNN`` (``Conv1d`` projections, dim-major head split ``view(b, dim,
  heads, -1)``, ``einsum('bdhn,bdhm->bhnm')``, a ``'self'`` then a ``'cross'`` layer shared by both images); bugs
  ``cross-src-not-swapped``, ``softmax-over-queries`` (``dim=-2``), ``split-heads-major`` (``view(b, heads, dim,
  -1)`` under the same einsum letters);
* loftr_linear — zju3dv/LoFTR ``LinearAttention`` (``elu + 1``, ``KV = einsum("nshd,nshv->nhdv")``, normaliser
  ``K.sum(dim=1)``, key and query masks) in ``LoFTREncoderLayer`` / ``LocalFeatureTransformer``; bugs
  ``k-unmasked`` (only the values masked), ``kv-einsum-transposed`` (``->nhvd`` read back as ``nhdv``);
* vits_relative_attention — jaywalnut310/vits ``MultiHeadAttention`` with ``window_size`` (``emb_rel_k``/``emb_rel_v``
  padded and sliced by ``_get_relative_embeddings``, ``_relative_position_to_absolute_position`` and back, channels
  first, ``sequence_mask``); bugs ``rel-table-pad-off-by-one`` (``pad_length = max(length - window_size, 0)``),
  ``abs-to-rel-pad-right`` (the skew pad ``[0, length]``), ``merge-no-transpose``.

======================== ========================= =================================================================
file                     variant                   first sight (DIMS | equal; with dependencies the same unless said)
======================== ========================= =================================================================
taming_attnblock         (correct)                 ✓ | ✓
taming_attnblock         no-weight-transpose       ✗ values-by-queries (both)
taming_attnblock         softmax-over-queries      ✗ softmax-wrong-axis (both)
taming_attnblock         keys-column-major         ✓ | ✓   (missed)
ccnet_criss_cross        (correct)                 ? | ?   (note mask-hides-own-key: the by-design -inf diagonal)
ccnet_criss_cross        att-h-not-permuted-back   ✗ mixed-axis | ✗ batch-mismatch, broadcast-mismatch
ccnet_criss_cross        query-w-from-h-permute    ✗ mixed-axis | ✗ batch-mismatch, join-mismatch
ccnet_criss_cross        no-inf-diagonal           ? | ?
superglue_gnn            (correct)                 ! keys-change-sequence (both; false)
superglue_gnn            cross-src-not-swapped     ✓ | ?   (missed)
superglue_gnn            softmax-over-queries      ✗ softmax-wrong-axis, keys-change-sequence (both)
superglue_gnn            split-heads-major         ✗ reduction-over-wrong-axis, keys-change-sequence (both;
                                                   with dependencies also heads-talk ×3)
loftr_linear             (correct)                 ✓ | ?
loftr_linear             k-unmasked                ✓ | ?   (missed)
loftr_linear             kv-einsum-transposed      ✓ | ?   (missed)
vits_relative_attention  (correct)                 ? | ?   (note lengths-unmeasured at DIMS)
vits_relative_attention  rel-table-pad-off-by-one  ? | ?
vits_relative_attention  abs-to-rel-pad-right      ? | ?
vits_relative_attention  merge-no-transpose        ✗ mixed-axis | ✗ mixed-axis, broadcast-mismatch
======================== ========================= =================================================================

Four bugs keep ``✓`` at DIMS, with dependencies too. ``keys-column-major``: the trace names the keys ``Wp·Hp``
(reshape #7) and the values ``N`` (= ``Hp·Wp``), and bmm #12 is described "v @ w_: [B, D, N] @ [B, Wp·Hp, N] ->
[B, D, N], sums over N": it contracts ``N`` against ``Wp·Hp``, two different flatten orders of the same grid,
without a finding. ``cross-src-not-swapped``: the cross layer turned into a second self layer; every shape and name
stays valid (and the bug removes the only warning the correct file gets). ``k-unmasked``: the padded keys still
enter LoFTR's normaliser ``K.sum(dim=1)``; with dependencies the padding contract, held on the correct file, turns
"not measured" ("the model hides the tokens where mask0 is 1, the value its unpadded rows hold: which value marks
the padding cannot be told") instead of failing. ``kv-einsum-transposed``: ``einsum("nshd,nshv->nhvd")`` gives
``[B, H, d_k, d_k]``, both last axes named ``d_k``, so reading it back as ``nhdv`` changes no name.

The correct SuperGlue file gets a false ``!``: ``keys-change-sequence`` at the shared ``attention`` einsum of
``layers.1`` ("makes scores [B, D%4, S, T] over keys of T, but the same line made [B, D%4, T, S] over keys of S
... one attention reads two sequences"): SuperGlue's cross layer is one module applied in both directions
(``layer(desc0, desc1)``, ``layer(desc1, desc0)``) by design. It is recorded with ``warned`` only so that the round
passes as measured; it is not an honest warning. The same file's ``nonstandard-head-split`` note says the dim-major
split "does break loading pretrained weights", though it is the layout SuperGlue's own checkpoint was trained in;
its heads are named ``D%4`` and its head width ``D/4`` rather than ``H``/``d_k``, and with dependencies "heads (no
head split found)". Its scores einsum ``'bdhn,bdhm->bhnm'`` is described "scores: sums over T" (it sums over
``D/4``); LoFTR's ``einsum("nshd,nshv->nhdv")`` is described "sums over d_k" (it sums over the keys ``s``). CCNet's
correct ``INF`` diagonal gets ``mask-hides-own-key`` ("a window or chunk mask built the wrong way round ... unless
the model means it"): the pixel's own logit is hidden in the column branch only because the row branch already
holds it in the same softmax. CCNet is ``?`` on the correct file because the ``in_dim // 8`` query/key channels
(conv2d #0 and the folds after it) stay unnamed; VITS is ``?`` because its whole relative branch (``rel_logits``
matmul #20, the pads and views of ``_relative_position_to_absolute_position``) stays unnamed, so both positional
bugs are ``?``. LoFTR at equal sizes (``B = T = S = H = 4``) names nothing at all.

Fixed since first sight (tests/engine/test_round59_fixes.py; ``EXPECTED`` holds the outcomes now):
``keys-column-major`` is ``✗ contracts-different-axes`` at both sizes ("sums over N of the first with Wp·Hp of the
second: both hold the same Hp and Wp positions, flattened Hp·Wp in one and Wp·Hp in the other"); SuperGlue's
correct file is ``✓`` (``?`` at equal sizes, where the names rest on the order of equal sizes): a later call whose
queries changed sequence too is one cross-attention run the other way, not judged by ``keys-change-sequence``; the
note says the split breaks loading weights trained with the usual split; the einsums' sentences name the axis they
sum over (``D/4`` for SuperGlue, the keys ``T`` for LoFTR). LoFTR's ``k-unmasked`` stays "not measured" with
dependencies: its two moves (the pads, then the real tokens) give what a row whose mask is inverted gives (the real
tokens read the pads, the pads' outputs move with nothing real), and that case is left unclaimed on purpose
(tests/engine/test_padding.py); telling them apart needs a third move (one real token alone), not made.
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public59 import (
    ccnet_criss_cross,
    loftr_linear,
    superglue_gnn,
    taming_attnblock,
    vits_relative_attention,
)

MODULES = (taming_attnblock, ccnet_criss_cross, superglue_gnn, loftr_linear, vits_relative_attention)
UNSURE = ("?", ())
CHECKED = ("✓", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (taming_attnblock, ""): [CHECKED, CHECKED],
    (taming_attnblock, "no-weight-transpose"): [("✗", ("values-by-queries",))] * 2,
    (taming_attnblock, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (taming_attnblock, "keys-column-major"): [("✗", ("contracts-different-axes",))] * 2,
    (ccnet_criss_cross, ""): [UNSURE, UNSURE],
    (ccnet_criss_cross, "att-h-not-permuted-back"): [("✗", ("mixed-axis",)),
                                                     ("✗", ("batch-mismatch", "broadcast-mismatch"))],
    (ccnet_criss_cross, "query-w-from-h-permute"): [("✗", ("mixed-axis",)),
                                                    ("✗", ("batch-mismatch", "join-mismatch"))],
    (ccnet_criss_cross, "no-inf-diagonal"): [UNSURE, UNSURE],
    (superglue_gnn, ""): [CHECKED, UNSURE],
    (superglue_gnn, "cross-src-not-swapped"): [CHECKED, UNSURE],
    (superglue_gnn, "softmax-over-queries"): [("✗", ("softmax-wrong-axis",))] * 2,
    (superglue_gnn, "split-heads-major"): [("✗", ("reduction-over-wrong-axis",))] * 2,
    (loftr_linear, ""): [CHECKED, UNSURE],
    (loftr_linear, "k-unmasked"): [CHECKED, UNSURE],
    (loftr_linear, "kv-einsum-transposed"): [CHECKED, UNSURE],
    (vits_relative_attention, ""): [UNSURE, UNSURE],
    (vits_relative_attention, "rel-table-pad-off-by-one"): [UNSURE, UNSURE],
    (vits_relative_attention, "abs-to-rel-pad-right"): [UNSURE, UNSURE],
    (vits_relative_attention, "merge-no-transpose"): [("✗", ("mixed-axis",)),
                                                      ("✗", ("mixed-axis", "broadcast-mismatch"))],
}

#: bugs that keep ``✓`` at DIMS without the value measurement (and with it): see the docstring
MISSED = {
    (superglue_gnn, "cross-src-not-swapped"),     # a cross layer made a self layer: every name stays valid
    (loftr_linear, "k-unmasked"),                 # padded keys in the normaliser K.sum(dim=1)
    (loftr_linear, "kv-einsum-transposed"),       # "->nhvd" read as "nhdv": both axes d_k
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))
