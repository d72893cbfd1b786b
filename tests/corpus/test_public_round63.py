"""A sixty-third round of public-style files (tests/corpus/public63: attention in structural biology and science
models, from projects or classes not yet in the corpus: lucidrains' alphafold2 axial attention over the pair, the
RoseTTAFold / RFdiffusion MSA track, OpenFold's invariant point attention, struct2seq's neighbour attention,
PhysicsNeMo's Pangu-Weather earth attention), traced at distinct sizes and at equal sizes, first sight recorded on
06b75e7b (main plus the files; other rounds' folders were being written in the same checkout at the time):

* lucidrains_af2_pairwise — lucidrains/alphafold2 ``PairwiseAttentionBlock``'s two ``AxialAttention``\\ s (row:
  ``'b h w d -> (b h) w d'``, column: ``'b h w d -> (b w) h d'``, each unfolded by its own ``output_fold_eq``), the
  edges as a per-head bias (``Linear(dim, heads)``, ``Rearrange('b i j h -> b h i j')``, ``repeat('b h i j -> (b
  x) h i j')``), the gated ``Attention`` (``mask[:, None, :, None] * mask[:, None, None, :]`` filled with
  ``-finfo.max``); bugs ``ingoing-folded-back-as-rows`` (the column attention unfolded with the row's equation: the
  pair is square, the update lands transposed), ``edges-repeat-outer`` (``'(x b)'``), ``gate-split-d-h`` (the gate
  applied per head before the merge, split ``(d h)``); twin ``gate-before-merge`` (split ``(h d)``: the same numbers);
* rfdiffusion_msa_row_bias — RosettaCommons/RFdiffusion ``SequenceWeight``, ``MSARowAttentionWithBias`` (tied over
  the sequences, ``einsum('bsqhd,bskhd->bqkh')``, heads last, the pair bias added, ``softmax(dim=-2)``) and
  ``MSAColAttention`` (``einsum('bqihd,bkihd->bihqk')``); bugs ``row-softmax-last-axis`` (``dim=-1`` on ``bqkh``),
  ``seq-weight-over-residues`` (``SequenceWeight``'s softmax over ``dim=2``), ``col-out-not-transposed``
  (``'bihqk,bkihd->bihqd'`` then ``reshape(B, N, L, -1)``);
* openfold_ipa — aqlaboratory/openfold ``InvariantPointAttention`` (Algorithm 22: scalar scores, ``sqrt(1/3) ·
  permute_final_dims(linear_b(z), (2, 0, 1))``, the point term ``q_pts.unsqueeze(-4) - k_pts.unsqueeze(-5)``
  weighted by ``softplus(head_weights)``, the square mask, the scalar / point / pair outputs, ``invert_apply``);
  bugs ``pair-bias-transposed`` (``(2, 1, 0)``), ``mask-query-rows`` (``inf · (mask.unsqueeze(-1) - 1)``),
  ``point-term-transposed`` (``q_pts.unsqueeze(-5) - k_pts.unsqueeze(-4)``); the file is SE(3)-invariant as written
  (a global rotation and translation of every frame changes the output by 6e-7);
* struct2seq_neighbor — jingraham/neurips19-graph-protein-design ``NeighborAttention`` in ``TransformerLayer``
  (``topk`` neighbours ``(B, N, K)``, ``gather_nodes``, ``cat_neighbors_nodes``, ``matmul(Q, K).view([B, N, K,
  H]).transpose(-2, -1)``, the masked softmax over the neighbours, ``matmul(attend.unsqueeze(-2), V.transpose(2,
  3))``); bugs ``logits-viewed-heads-first`` (``view([B, N, H, K])`` for view and transpose),
  ``values-viewed-heads-first`` (``V.view([B, N, H, K, d])``), ``softmax-over-heads`` (``dim=-2``); the neighbours
  declared ``K`` (a name with no role);
* physicsnemo_earth_attention — NVIDIA/physicsnemo ``EarthAttention3D`` in a shifted ``Transformer3DBlock``
  (``window_partition`` folding the longitude windows into the batch ``(B·nLon)``, the pressure/latitude windows an
  axis ``nW_`` of their own with one earth-specific bias table per window type, ``permute(3, 2, 0, 1)``, the shift
  mask by ``attn.view(B_ // nLon, nLon, nH, nW_, N, N) + mask.unsqueeze(1).unsqueeze(0)``); bugs
  ``merge-without-permute``, ``mask-fold-lon-outer`` (the fold read ``(nLon B)``), ``earth-bias-transposed``
  (``permute(3, 2, 1, 0)``); the grid declared ``Fp Hp Wp`` (pressure levels, latitudes, longitudes).

=========================== =========================== ======================================================
file                        variant                     first sight (DIMS | equal; with dependencies the same)
=========================== =========================== ======================================================
lucidrains_af2_pairwise     (correct)                   ✗ mask-hides-every-key, mixed-axis ×3 |
                                                        ✗ mask-hides-every-key (all false)
lucidrains_af2_pairwise     ingoing-folded-back-as-rows ✗ the same four (nothing of its own) |
                                                        ✗ mask-hides-every-key, mixed-axis
lucidrains_af2_pairwise     edges-repeat-outer          ✗ the same four + mixed-axis (its own, #37 reshape) |
                                                        ✗ mask-hides-every-key, mixed-axis
lucidrains_af2_pairwise     gate-split-d-h              ✗ the same four (nothing of its own) |
                                                        ✗ mask-hides-every-key (nothing of its own)
lucidrains_af2_pairwise     gate-before-merge (twin)    ✗ as the correct file (all false)
rfdiffusion_msa_row_bias    (correct)                   ? | ?   (checked 33 of 38)
rfdiffusion_msa_row_bias    row-softmax-last-axis       ✗ softmax-wrong-axis (both)
rfdiffusion_msa_row_bias    seq-weight-over-residues    ✗ softmax-wrong-axis (both)
rfdiffusion_msa_row_bias    col-out-not-transposed      ✗ mixed-axis | ! tokens-merged-with-features
openfold_ipa                (correct)                   ? | ?   (checked 28 of 90)
openfold_ipa                pair-bias-transposed        ? | ?
openfold_ipa                mask-query-rows             ✗ mask-wrong-axis (both)
openfold_ipa                point-term-transposed       ? | ?
struct2seq_neighbor         (correct)                   ✗ attends-over-wrong-axis | ✗ mask-hides-every-key
                                                        (both false)
struct2seq_neighbor         logits-viewed-heads-first   ✗ the same (nothing of its own)
struct2seq_neighbor         values-viewed-heads-first   ✗ the same (nothing of its own)
struct2seq_neighbor         softmax-over-heads          ✗ attends-over-wrong-axis (false, nothing of its own) | ?
physicsnemo_earth_attention (correct)                   ? | ?   (checked 28 of 37)
physicsnemo_earth_attention merge-without-permute       ✗ mixed-axis | ✗ mixed-axis ×3
physicsnemo_earth_attention mask-fold-lon-outer         ✗ mixed-axis | ?
physicsnemo_earth_attention earth-bias-transposed       ? | ?
=========================== =========================== ======================================================

No bug gets ``✓``. But two correct files get a false ``✗`` at DIMS (and at equal sizes), so five of their bugs are
not ``✓`` only because of it: ``ingoing-folded-back-as-rows`` and ``gate-split-d-h`` (lucidrains) and all three of
struct2seq's get the correct file's findings and nothing of their own (struct2seq's ``softmax-over-heads`` at equal
sizes is ``?``). The false findings:

* lucidrains ``mixed-axis`` ×3, at the ``rearrange``\\ s with the fold equations ``'b h w d -> (b h) w d'``, ``'b h
  w -> (b w) h'``, ``'(b h) w d -> b h w d'``: "names an axis h (heads), but in [B=2, T=5, T=5, D=32] that axis
  holds pieces of the tokens ... Split the features: 'b n (h d) -> b h n d'". The file's ``h`` and ``w`` are the
  pair grid's height and width (its rows and columns of residues), not heads: the einops letter is read as the
  heads by its spelling alone.
* lucidrains ``mask-hides-every-key`` (masked_fill #20, "in 2 slices of the scores [B·T=10, H=4, T=5, T=5] ... as if
  the mask's polarity were reversed. Invert it"): the pair mask is ``m_i & m_j``, so the rows of the two padded
  residues of the last structure have no real key by design (their outputs are padding); the polarity is right.
  struct2seq's equal-size ``mask-hides-every-key`` (where #33, "[B=4, T=4, 4, T[neighbors_flat]%3=3]") is the same:
  ``mask_attend = mask_i · mask_j`` of the gathered neighbours, the padded residues' rows all zero (the layer's
  ``mask_V`` zeroes their outputs).
* struct2seq ``attends-over-wrong-axis`` at matmul #28 (``Q @ K``, ``[B, N, 1, H, 1, d] @ [B, N, K, H, d, 1]``):
  "treats T as a batch axis and multiplies None x None matrices: [B=2, T=6, 5, 4, 1, 1]. Attention must mix
  tokens, but here each token only sees its own heads ... after view(B, T, H, d_k), call transpose(1, 2)": each
  residue attends over its own ``K`` gathered neighbours, so the residues are a batch axis by design and the
  neighbours ``K`` (unnamed here) are the keys; "None x None" is a formatting slip.

Since first sight (the engine's fixes of this round, each tested in tests/engine/test_round63_fixes.py):

* an einops letter given to one whole axis (``h`` holding all of ``T``) contradicts nothing: no tokens were split
  into heads there (:func:`shapetrace.engine.infer.einops._whole_axis`); an axis holding a piece of the tokens
  still does (round 57's AnimateDiff ``way-back-reshape``);
* a fold of tokens into the batch (``B·T``) slices the scores by tokens: a padded row's slice hidden whole is no
  reversed polarity (``rules.masks._sliced_by_tokens``, also read on a ``where``'s output);
* a matmul with an unnamed batch axis (the ``K`` gathered neighbours) proves no attention over the wrong axis.

So both correct files are ``?`` at both sizes, the twin too; lucidrains' ``edges-repeat-outer`` keeps its own
``✗ mixed-axis``; its ``ingoing-folded-back-as-rows`` (the pair's two ``T`` axes swapped: "permute moves two axes
both named T past each other") and ``gate-split-d-h`` (a ``nonstandard-head-split`` note) are ``?``, and struct2seq's
three bugs are ``?`` (the neighbour scores' axes are unnamed: nothing of theirs is checked).

Unchecked: OpenFold IPA's pair ``z [B, T, T, 16]``, its ``linear_b`` bias and the points ``(..., H, P, 3)`` are
unnamed (``checked 28 of 90``; the xyz axis reads ``F_in=3``), so ``pair-bias-transposed`` and
``point-term-transposed`` are ``?``; RFdiffusion's pair ``layer_norm`` / ``to_b`` (#1, #15) and the sequence weight's
``expand`` / ``mul`` (#17, #18) are unnamed; PhysicsNeMo's earth bias (``earth_position_bias_table[index.view(-1)]
.view(N, N, nW_, -1)``, #16-#19) is unnamed, so ``earth-bias-transposed`` is ``?``. PhysicsNeMo's grid, declared
``Fp=2 Hp=6 Wp=20``, is read from the flat tokens as ``Fp·Hp·Wp/120``, ``Fp·Hp·Wp/20%6``, ``Fp·Hp·Wp%20`` after
``view(B, Pl, Lat, Lon, C)`` (not ``Fp``, ``Hp``, ``Wp``), and a window's ``N`` as ``Fp·Hp·Wp/120·Fp·Hp·Wp/20%2·
Fp·Hp·Wp%4``.
"""

from __future__ import annotations

from tests.corpus.helpers import round_sizes, round_tests, traced_build, verdict_line
from tests.corpus.public63 import (
    lucidrains_af2_pairwise,
    openfold_ipa,
    physicsnemo_earth_attention,
    rfdiffusion_msa_row_bias,
    struct2seq_neighbor,
)

MODULES = (lucidrains_af2_pairwise, rfdiffusion_msa_row_bias, openfold_ipa, struct2seq_neighbor,
           physicsnemo_earth_attention)
UNSURE = ("?", ())
SOFTMAX = ("✗", ("softmax-wrong-axis",))
MIXED = ("✗", ("mixed-axis",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (rfdiffusion_msa_row_bias, ""): [UNSURE, UNSURE],
    (rfdiffusion_msa_row_bias, "row-softmax-last-axis"): [SOFTMAX, SOFTMAX],
    (rfdiffusion_msa_row_bias, "seq-weight-over-residues"): [SOFTMAX, SOFTMAX],
    (rfdiffusion_msa_row_bias, "col-out-not-transposed"): [MIXED, ("!", ("tokens-merged-with-features",))],
    (openfold_ipa, ""): [UNSURE, UNSURE],
    (openfold_ipa, "pair-bias-transposed"): [UNSURE, UNSURE],
    (openfold_ipa, "mask-query-rows"): [("✗", ("mask-wrong-axis",))] * 2,
    (openfold_ipa, "point-term-transposed"): [UNSURE, UNSURE],
    (physicsnemo_earth_attention, ""): [UNSURE, UNSURE],
    (physicsnemo_earth_attention, "merge-without-permute"): [MIXED, ("✗", ("mixed-axis",) * 3)],
    (physicsnemo_earth_attention, "mask-fold-lon-outer"): [MIXED, UNSURE],
    (physicsnemo_earth_attention, "earth-bias-transposed"): [UNSURE, UNSURE],
    (lucidrains_af2_pairwise, ""): [UNSURE, UNSURE],
    (lucidrains_af2_pairwise, "ingoing-folded-back-as-rows"): [UNSURE, UNSURE],
    (lucidrains_af2_pairwise, "edges-repeat-outer"): [MIXED, MIXED],
    (lucidrains_af2_pairwise, "gate-split-d-h"): [UNSURE, UNSURE],
    (lucidrains_af2_pairwise, "gate-before-merge"): [UNSURE, UNSURE],
    (struct2seq_neighbor, ""): [UNSURE, UNSURE],
    (struct2seq_neighbor, "logits-viewed-heads-first"): [UNSURE, UNSURE],
    (struct2seq_neighbor, "values-viewed-heads-first"): [UNSURE, UNSURE],
    (struct2seq_neighbor, "softmax-over-heads"): [UNSURE, UNSURE],
}

#: bugs that keep ``✓`` at DIMS without the value measurement (and with it): none this round
MISSED: set = set()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, missed=frozenset(MISSED))



def test_lucidrains_pair_folds_are_no_head_split():
    """First sight (06b75e7b): ``✗ mask-hides-every-key, mixed-axis ×3``, all false (with dependencies the same)."""
    t = traced_build(lucidrains_af2_pairwise, "", lucidrains_af2_pairwise.DIMS[0], dependencies=True)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert verdict_line(t)[0] == "?"


def test_struct2seq_neighbour_attention_is_no_wrong_axis():
    """First sight (06b75e7b): ``✗ attends-over-wrong-axis`` (each residue attends its own K neighbours)."""
    for dims in round_sizes(struct2seq_neighbor):
        t = traced_build(struct2seq_neighbor, "", dims)
        assert [d.kind for d in t.diagnostics if d.severity != "note"] == [], dims
