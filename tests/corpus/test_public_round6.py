"""A sixth round of files in the styles of public code (tests/corpus/public6, each citing its source),
traced at distinct sizes and at B = T = H = 4 as a held-out set traces them (issue 33): no ``✓`` on a
buggy file, no error on a correct one, and the classes this round found, each failing on 742b81f:

* SAM's windows batched with the batch and then folded with the heads (``reshape(B * heads, h * w, -1)``
  of ``(B·nW, h·w, ...)``) were ``✗ mixed-axis`` on correct code: (B·nW)·H is read as B·H is;
* two directions of one grid (``Hp%2`` against ``Wp%2``) lined up by a broadcast were silent: SAM's
  decomposed row bias laid along the key columns is a ``broadcast-mismatch``;
* a causal mask on Transformer-XL's ``ijbn`` scores (keys on axis 1, ``softmax(dim=1)``) was read as
  if the keys were last: ``✗ mask-hides-every-key`` on correct code;
* an einsum's queries and keys are found wherever they sit in its output (``ibnd,jbnd->ijbn``), so a
  softmax over Transformer-XL's queries (``dim=0``) is ``softmax-wrong-axis``;
* unnamed pieces of D that lie within ``d_k`` (OLMo's ``rotate_half`` halves, ``D%4+D%4``) have the role
  of ``d_k``: a false ``✗ broadcast-mismatch`` on correct code;
* a mask combined from parts and then sliced whole (OLMo's ``attention_bias[:, :, k - q : k, :k]``)
  keeps its parts: the padding part put on the queries is ``mask-wrong-axis`` (it was ``✓`` once the
  false error above was gone).

Branch inputs1 (infer/seeds.py ``batch_seed``, engine/lengths_read.py): espnet_conformer's ``[B]`` lengths are
named, the correct file ``? 25 of 37`` (20 on 5774b39), and its mask built from them is ``not proven: the pads of a
mask the model builds from its lengths were not measured unread``: still ``?``.
"""

from __future__ import annotations

import pytest
import torch

import shapetrace
from tests.corpus.helpers import equal_sizes as equal
from tests.corpus.helpers import error_kinds as errors
from tests.corpus.helpers import findings
from tests.corpus.helpers import module_name as name
from tests.corpus.helpers import round_outcome as _outcome
from tests.corpus.helpers import round_sizes as _sizes
from tests.corpus.helpers import traced_build as traced
from tests.corpus.helpers import verdict_line as line
from tests.corpus.public6 import (
    bigcode_mqa,
    espnet_conformer,
    gemma_pytorch,
    ldm_cross,
    meta_llama,
    olmo,
    sam_encoder,
    transformer_xl,
)

MODULES = (meta_llama, bigcode_mqa, transformer_xl, espnet_conformer, sam_encoder, ldm_cross, olmo, gemma_pytorch)


# -- SAM: windows batched, folded with the heads, and a decomposed bias laid the wrong way ---------------

SAM = sam_encoder.DIMS[0]


@pytest.mark.parametrize("dims", [SAM, equal(SAM)])
def test_sam_windows_folded_with_heads_are_not_a_mix(dims):
    """facebookresearch/segment-anything's ``qkv.reshape(3, B * self.num_heads, H * W, -1)`` on windows
    already batched as (B·nW): 742b81f said "axis 1 holds pieces of B and Hp/2 and Wp/2 and H, so its
    entries mix different tokens together" (``✗ mixed-axis``) on correct code."""
    t = traced(sam_encoder, "", dims)
    assert errors(t) == []
    fold = next(e for e in t.events if e.op == "reshape" and "B * self.num_heads" in e.code)
    assert fold.outputs[0].dims == ("qkv", "B*Hp/2*Wp/2*H", "Hp%2*Wp%2", "d_k")
    assert line(t).startswith("? checked 31 of 33 ops that could carry a layout bug; not checked (unnamed axes): "
                              "#14 __getitem__, #17 __getitem__")


@pytest.mark.parametrize("dims", [SAM, equal(SAM)])
def test_sam_window_reverse_without_permute_is_still_a_mix(dims):
    # the twin of the fold: window_unpartition viewing the windows back without permute(0, 1, 3, 2, 4, 5)
    t = traced(sam_encoder, "unpartition-no-permute", dims)
    assert errors(t) == ["mixed-axis"]


@pytest.mark.parametrize("dims", [SAM, equal(SAM)])
def test_sam_row_bias_along_the_key_columns_is_a_broadcast_mismatch(dims):
    """``rel_h[:, :, :, None, :] + rel_w[:, :, :, :, None]`` for SAM's ``rel_h[:, :, :, :, None] +
    rel_w[:, :, :, None, :]``: square windows make the shapes agree. 742b81f: ``?`` with no finding."""
    t = traced(sam_encoder, "rel-swapped", dims)
    assert errors(t) == ["broadcast-mismatch"]
    (d,) = [d for d in t.diagnostics if d.kind == "broadcast-mismatch"]
    assert d.message.startswith("add #24 lines up [B·Hp/2·Wp/2·H=")
    assert "Hp%2=2, Wp%2=2, Wp%2=2, Hp%2=2] with [" in d.message
    assert "axis -1 pairs Hp%2 (tokens) of the first with Wp%2 (tokens) of the second" in d.message


def test_rows_and_columns_of_one_grid_never_line_up_but_the_same_direction_does():
    """The mechanism alone: a ``[Hp, Wp]`` bias added to ``[B, Hp, Wp]`` is silent; its transpose at
    Hp = Wp is a finding (sizes never decide: both directions are 4)."""
    x = torch.randn(2, 4, 4)
    bias = torch.randn(4, 4)
    with shapetrace.trace(dims="B=2 Hp=4 Wp=4") as t:
        shapetrace.name(x, "B Hp Wp")
        shapetrace.name(bias, "Hp Wp")
        x + bias                                                   # (B, Hp, Wp)
        x + bias.t()                                               # bug: (Wp, Hp) on (Hp, Wp)
    assert [(d.kind, t.events[d.event].code.split("#")[0].strip()) for d in t.diagnostics] == [
        ("broadcast-mismatch", "x + bias.t()")]


# -- Transformer-XL: scores laid out (i, j, b, n) --------------------------------------------------------

@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"])
def test_transformer_xl_causal_mask_on_ijbn_scores_is_not_blind(dims):
    """kimiyoung/transformer-xl's ``masked_fill(dec_attn_mask[:, :, :, None], -inf)`` on ``[T, T, B, H]``
    scores, normalised with ``softmax(dim=1)``: 742b81f read the last two axes (B, H) as queries and
    keys and said "hides every key from every query in 15 slices" (``✗ mask-hides-every-key``)."""
    t = traced(transformer_xl, "", dims)
    assert errors(t) == []
    assert line(t).startswith("? checked")


def test_transformer_xl_softmax_over_the_queries_is_an_error():
    """``F.softmax(attn_score, dim=0)`` on ``ijbn`` scores: the einsum ``ibnd,jbnd->ijbn`` keeps i from
    the queries and j from the keys, so axis 0 is the queries. 742b81f: only the false mask error."""
    t = traced(transformer_xl, "softmax-queries", "B=2 T=6 D=32 H=4")
    assert errors(t) == ["softmax-wrong-axis"]
    assert t.diagnostics[0].message == (
        "softmax #20 normalises over axis 0 (T, query) of the scores [T=6, T=6, B=2, H=4]; each query's weights "
        "must sum to 1 over the keys, axis -3.")


def test_einsum_queries_and_keys_in_the_middle_of_the_output():
    q, k = torch.randn(5, 2, 3, 4), torch.randn(5, 2, 3, 4)
    with shapetrace.trace(dims="T=5 B=2 H=3 d_k=4") as t:
        shapetrace.name(q, "T B H d_k")
        shapetrace.name(k, "T B H d_k")
        torch.einsum("ibnd,jbnd->ijbn", q, k)                     # (T, T, B, H)
        torch.einsum("ibnd,jbnd->bnij", q, k)                     # (B, H, T, T)
    assert [[a.role for a in e.outputs[0].axes] for e in t.events] == [
        ["query", "key", None, None], [None, None, "query", "key"]]


# -- OLMo: rotate_half by view and unbind, and a padding bias on the queries -----------------------------

@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"])
def test_olmo_rotate_half_halves_are_head_features(dims):
    """allenai/OLMo's ``x.view(B, nh, T, 2, hs // 2).unbind(dim=-2)`` then ``cat((-x2, x1), dim=-1)``
    makes ``D%4+D%4`` (pieces of D inside d_k): 742b81f paired it with d_k as "features" against
    "head_features" (``✗ broadcast-mismatch``) on correct code."""
    t = traced(olmo, "", dims)
    assert errors(t) == []
    half = next(e for e in t.events if e.op == "cat" and "torch.cat((-x2, x1)" in e.code)
    assert half.outputs[0].dims == ("B", "H", "T", "D%4+D%4")


def test_olmo_correct_file_earns_its_check_mark():
    """31 ops (6 on the values) before lib13: the prefill's whole slices ``attention_bias[:, :, key_len -
    query_len : key_len, :key_len]``, ``pos_sin``/``pos_cos[...]`` read their operands exactly as they lie and
    are no longer counted (the decode steps' slices, which pick, still are)."""
    assert line(traced(olmo, "", "B=2 T=6 D=32 H=4")).startswith(
        "✓ checked all 28 ops that could carry a layout bug (4 of them on the values of the rotary tables or "
        "causal masks they build)")


@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"])
def test_olmo_padding_bias_on_the_queries_through_a_whole_slice_is_an_error(dims):
    """``pad[:, None, :, None]`` added to the causal bias, sliced ``[:, :, k - q : k, :k]`` (all of it) and
    given to SDPA: the slice keeps each axis in place, so the parts are followed through it. Without
    the false error above this file was ``✓``."""
    t = traced(olmo, "pad-on-queries", dims)
    assert errors(t) == ["mask-wrong-axis"]
    (d,) = [d for d in t.diagnostics if d.kind == "mask-wrong-axis"]
    assert "combined from parts; the part [" in d.message and ", 1, " in d.message


def test_a_mask_sliced_at_a_step_is_not_followed():
    """The twin of the slice: a pick with a step moves entries along the axis (the parts' shapes still
    stand, but the slice is not whole), so nothing is followed and nothing is said."""
    causal = torch.full((6, 6), float("-inf")).triu(1)
    pad = torch.zeros(2, 6)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=3 d_k=8") as t:
        bias = (causal[None, None] + pad[:, None, :, None])[:, :, ::2, ::2]   # (B, 1, 3, 3)
        q = torch.randn(2, 4, 3, 8)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=bias)
    assert "mask-wrong-axis" not in errors(t)


# -- every file of the round, at distinct sizes and at B = T = H = 4 ------------------------------------

#: (module, bug) -> for each of the module's DIMS, at those sizes and at B = T = H = 4: the verdict's
#: first letter and the kinds of its errors and warnings ("raises": the bug raises at those sizes)
EXPECTED = {
    (meta_llama, ""): [("?", ()), ("?", ())],
    # (the batch-mismatch of the same matmul folded under its cause since gqa-head-order blames the axis the
    # repeat tiles where the repeat lays it, [B, S, H_kv·n_rep, d]: rules/contracts._head_order_diagnostic)
    (meta_llama, "repeat-tiled"): [("✗", ("gqa-head-order",))] * 2,
    (meta_llama, "sdpa-causal"): [("✗", ("causal-mask-misaligned",))] * 2,
    (meta_llama, "mask-order"): [("?", ()), ("?", ())],
    # the multi-query width D + 2·d_k read as H query heads, one key and one value head (round 9): the correct
    # file is ✓ at distinct sizes (B = T keeps its "names from sizes alone"); each bug is found where it is,
    # the mask lined up with the heads (``broadcast-mismatch``), the heads-first view of token-major rows
    # (``mixed-axis``); after the mismatched ``where`` its output takes the mask's T for the heads, hence the
    # ``tokens-merged-with-features`` beside it at T = H (noted in the round-9 report, left as it is)
    (bigcode_mqa, ""): [("✓", ()), ("?", ()), ("✓", ()), ("?", ())],
    (bigcode_mqa, "mask-mha-axis"): [("raises", ()), ("✗", ("broadcast-mismatch",)),
                                     ("✗", ("broadcast-mismatch", "tokens-merged-with-features")),
                                     ("✗", ("broadcast-mismatch",))],
    (bigcode_mqa, "heads-first"): [("✗", ("mixed-axis", "projection-over-tokens", "tokens-merged-with-features")),
                                   ("✗", ("broadcast-mismatch",)),
                                   ("✗", ("broadcast-mismatch", "tokens-merged-with-features")),
                                   ("✗", ("broadcast-mismatch",))],
    (transformer_xl, ""): [("?", ()), ("?", ())],
    # at B = T = H = 4 every reading finds a bug (read [B, T, D], the einsum "ijbn,jbnd->ibnd" sums the values
    # over the batch; read [T, B, D], the softmax runs over the queries): the batch-first one is kept, saying
    # its names rest on the order and naming the other (an error since the eighth public round's einsum rule)
    (transformer_xl, "softmax-queries"): [("✗", ("softmax-wrong-axis",)), ("✗", ("reduction-over-wrong-axis",))],
    (transformer_xl, "shift-batch"): [("✗", ("mixed-axis",))] * 2,
    (espnet_conformer, ""): [("?", ())] * 4,
    (espnet_conformer, "mask-time1"): [("✗", ("mask-wrong-axis",))] * 4,
    (espnet_conformer, "bias-on-tokens"): [("raises", ())] + [("?", ())] * 3,
    (sam_encoder, ""): [("?", ()), ("?", ())],
    (sam_encoder, "rel-swapped"): [("✗", ("broadcast-mismatch",))] * 2,
    (sam_encoder, "unpartition-no-permute"): [("✗", ("mixed-axis",))] * 2,
    (ldm_cross, ""): [("?", ()), ("?", ())],
    (ldm_cross, "mask-heads-first"): [("✗", ("mask-wrong-batch-order",))] * 2,
    # (the feature map [B, D, Hp, Wp] is seeded since reports2: the scrambled output added to the residual
    # x, twice, lines batch entries up with heads; effects of the same bug, at its two residual adds)
    (ldm_cross, "merge-heads-first"): [("✗", ("projection-over-tokens", "broadcast-mismatch",
                                              "broadcast-mismatch"))] * 2,
    (olmo, ""): [("✓", ()), ("?", ())],
    (olmo, "pad-on-queries"): [("✗", ("mask-wrong-axis",))] * 2,
    (olmo, "rotate-interleaved"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    (gemma_pytorch, ""): [("?", ()), ("?", ())],
    # (? ? until the heads' width 16 ≠ D / H = 8 was read from the split: shapetrace.engine.head_width)
    (gemma_pytorch, "repeat-tiled"): [("✗", ("gqa-head-order", "gqa-head-order"))] * 2,   # (k's line, v's)
    (gemma_pytorch, "mask-rows-from-zero"): [("?", ()), ("?", ())],
}


CASES = [pytest.param(m, b, d, want, id=f"{name(m)}-{b or 'correct'}-{d.replace(' ', ',')}")
         for (m, b), wants in EXPECTED.items() for d, want in zip(_sizes(m), wants)]


@pytest.mark.parametrize("module,bug,dims,want", CASES)
def test_each_file_gets_its_verdict(module, bug, dims, want):
    assert _outcome(module, bug, dims) == want


def test_every_file_and_bug_of_the_round_is_listed():
    assert {(m, b) for m, b in EXPECTED} == {(m, b) for m in MODULES for b in ("", *m.BUGS)}
    assert all(len(wants) == len(_sizes(m)) for (m, _), wants in EXPECTED.items())


@pytest.mark.parametrize("module,dims", [pytest.param(m, d, id=f"{name(m)}-{d.replace(' ', ',')}")
                                         for m in MODULES for d in _sizes(m)])
def test_correct_files_have_no_error_or_warning(module, dims):
    assert findings(traced(module, "", dims)) == ()


@pytest.mark.parametrize("module,bug,dims", [pytest.param(m, b, d, id=f"{name(m)}-{b}-{d.replace(' ', ',')}")
                                             for m in MODULES for b in m.BUGS for d in _sizes(m)])
def test_buggy_files_get_no_check_mark(module, bug, dims):
    if _outcome(module, bug, dims)[0] == "raises":
        pytest.skip("the bug raises at these sizes")
    assert not line(traced(module, bug, dims)).startswith("✓")
