"""A seventh round of files in the styles of public code (tests/corpus/public7, each citing its source),
traced at distinct sizes and at B = T = H = 4 as a held-out set traces them (issue 33).

First sight on 34f2dbd (24 correct runs: 9 files and 2 twins at two or four sizes; 44 buggy runs that do
not raise): correct 3 ``✓``, 13 ``?``, 8 false ``✗`` (DeBERTa and the Set Transformer at both sizes,
sequence-first fairseq and ChatGLM2 at B = T = H = 4); buggy 31 ``✗`` (11 only for a false reason:
DeBERTa's 4, the Set Transformer's 3, PVT's 2 from a false grid name, fairseq's 2 at B = T = H = 4), 10 ``?``,
3 ``✓`` (RetNet's transposed decay, both MMDiT bugs). Now: correct 3 ``✓``, 21 ``?``, no false ``✗``;
buggy 24 ``✗``, 20 ``?``, no ``✓`` (sequence-first code at B = T = H = 4: a finding only one order of the
equal sizes makes is not reported unless every order finds an error, :mod:`shapetrace.engine.readings`). The classes
fixed this round, each failing on 34f2dbd:

* a product whose operand was made by ``query_proj`` is called "the queries" only where its rows are
  tokens: DeBERTa's position-to-content ``bmm(key_layer, pos_query_layer.transpose(-1, -2))`` multiplies
  the keys by a projected table of relative positions, not swapped scores (a false
  ``query-key-swapped``);
* positions combined with positions count no axis: ``q_ids[:, None] - k_ids[None, :]`` is a distance,
  so DeBERTa's ``c2p_pos`` / ``p2c_pos`` gathers along the ``2·span`` axis are not picks "with indices
  that count T" (a false ``index-wrong-axis``);
* a table over the queries and keys multiplied onto the scores gets a row, and its zeros are read as a
  mask's hidden keys are: RetNet's decay built on the future (``triu``) is ``causal-mask-reversed``
  (it was ``✓``);
* parts that are each all of one batch axis, joined along it (the Set Transformer's ``cat(Q.split(d, 2),
  0)`` on seeds whose features have no name), give an axis with no name, not ``B+B+B+B``: that sum was
  read as another batch than the keys' ``H*B`` and as a mix once cut by ``B`` (false ``batch-mismatch``,
  ``mixed-axis`` and ``projection-over-tokens`` on correct code, at every size);
* a strided conv's output grid is named ``Hp``/``Wp`` only where those are declared with its size: PVT's
  spatial reduction of a 6 x 4 grid to 3 x 2 was named ``Hp``, ``Wp`` (a name contradicting its size);
* the keys and values of ``F.scaled_dot_product_attention`` must hold one token axis: SD3's keys joined
  ``T+S`` with values joined ``S+T`` are ``contracts-different-axes`` (was ``✓``); a matmul contracting
  two joins of the same parts in other orders is the same finding;
* a slice that cuts a join of sequences off its parts' bounds (``(T+S)[5:17]``) is not proven by names:
  MMDiT's output split at the text's length was ``✓``, now ``?``.

``EXPECTED`` pins what the engine says today, including what is still wrong (each listed below it).
"""

from __future__ import annotations

import pytest
import torch

import shapetrace
from tests.corpus.helpers import findings
from tests.corpus.helpers import module_name as name
from tests.corpus.helpers import round_outcome as _outcome
from tests.corpus.helpers import round_sizes as _sizes
from tests.corpus.helpers import traced_build as traced
from tests.corpus.helpers import verdict_line as line
from tests.corpus.public7 import (
    cait,
    chatglm2,
    deberta_v2,
    fairseq_mha,
    linformer,
    mmdit,
    pvt,
    retnet,
    set_transformer,
)

MODULES = (fairseq_mha, deberta_v2, pvt, linformer, cait, mmdit, retnet, set_transformer, chatglm2)


# -- DeBERTa-v2: relative positions gathered, a position table projected by query_proj -------------------

@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"])
def test_deberta_disentangled_attention_has_no_false_error(dims):
    """huggingface/transformers' ``DisentangledSelfAttention``: 34f2dbd said ``index-wrong-axis`` twice
    (the c2p and p2c gathers "with indices that count T") and ``query-key-swapped`` (``bmm(key_layer,
    pos_query_layer.transpose(-1, -2))``) on correct code, at distinct sizes."""
    t = traced(deberta_v2, "", dims)
    assert findings(t) == ()
    assert line(t).startswith("? ")


def test_a_difference_of_positions_is_not_a_position():
    """The mechanism alone: ``arange(T)`` gathered along an axis that is not the tokens is a pick by
    positions of T on the wrong axis (its twin), while ``arange(T)[:, None] - arange(T)[None, :] + span``
    is a distance and picks nothing by position."""
    def picks(relative: bool):
        x = torch.randn(2, 6, 8)
        with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
            ids = torch.arange(x.size(1))
            index = ids[:, None] - ids[None, :] + 4 if relative else ids[:, None].expand(6, 6)
            torch.gather(x, -1, index.clamp(0, 7).expand(2, 6, 6))          # (B, T, T)
        return [d.kind for d in t.diagnostics if d.severity == "error"]
    assert picks(relative=False) == ["index-wrong-axis"]
    assert picks(relative=True) == []


def test_keys_times_a_projected_position_table_are_not_swapped_scores():
    """The mechanism alone: ``k @ q_tableᵀ`` where the "query" operand is ``query_proj`` of a table of
    positions (its rows are not tokens) is not ``query-key-swapped``; ``k @ qᵀ`` on tokens still is."""
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x, table):
            k = self.k_proj(x)                                               # (B, T, D)
            k @ self.q_proj(table).transpose(-1, -2)                         # (B, T, P): p2c, correct
            return k @ self.q_proj(x).transpose(-1, -2)                      # (B, S, T): swapped

    torch.manual_seed(0)
    model, x, table = Attention(), torch.randn(2, 6, 8), torch.randn(5, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        shapetrace.name(x, "B T D")
        model(x, table)
    swapped = [t.events[d.event].code.split("#")[0].strip() for d in t.diagnostics if d.kind == "query-key-swapped"]
    assert swapped == ["return k @ self.q_proj(x).transpose(-1, -2)"]


# -- RetNet: a decay table multiplied onto the scores -----------------------------------------------------

@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"])
def test_retnet_decay_laid_on_the_future_is_a_reversed_mask(dims):
    """microsoft/torchscale's ``qk_mat = qk_mat * mask`` with the decay built by ``triu`` and ``index[None, :]
    - index[:, None]``: each query sums the tokens after it. 34f2dbd: ``✓ checked all 36 ops`` (a product
    onto the scores had no row, so its zeros were never read)."""
    t = traced(retnet, "decay-future", dims)
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert d.kind == "causal-mask-reversed"
    assert d.message.startswith("mul #30 hides, along the keys (axis -1, T) of the scores [B=")
    assert "exactly the keys before each query ([" in d.message


def test_a_multiplied_table_is_read_as_a_mask_and_a_per_head_scale_is_not():
    """The mechanism alone: zeros of a ``[T, T]`` table multiplied onto scores drop keys, read as a mask's
    hidden keys are: ``tril`` (causal) is silent, ``triu`` is reversed; a per-head scale ``[H, 1, 1]`` is
    no table over the queries and keys and gets no row."""
    q = torch.randn(2, 4, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=6 d_k=8") as t:
        shapetrace.name(q, "B H T d_k")
        scores = q @ q.transpose(-1, -2)                                   # (B, H, T, T)
        scores * torch.rand(4, 1, 1)                                       # a per-head scale
        scores * torch.ones(6, 6).tril()                                   # retention's causal decay
        scores * torch.ones(6, 6).triu()                                   # bug: the future retained
    rows = [e.code.strip() for e in t.events if e.op == "mul"]
    assert rows == ["scores * torch.ones(6, 6).tril()                                   # retention's causal decay",
                    "scores * torch.ones(6, 6).triu()                                   # bug: the future retained"]
    assert [(d.kind, t.events[d.event].code.split("#")[0].strip()) for d in t.diagnostics if d.severity == "error"] \
        == [("causal-mask-reversed", "scores * torch.ones(6, 6).triu()")]


# -- Set Transformer: heads stacked on the batch by a cat of splits --------------------------------------

@pytest.mark.parametrize("dims", ["B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"])
def test_set_transformer_heads_stacked_on_the_batch_are_no_false_error(dims):
    """juho-lee/set_transformer's ``MAB``: 34f2dbd said ``batch-mismatch`` (``B+B+B+B`` against ``H*B``),
    ``mixed-axis`` and ``projection-over-tokens`` on correct code."""
    t = traced(set_transformer, "", dims)
    assert findings(t) == ()
    stacked = next(e for e in t.events if e.op == "cat" and e.code.lstrip().startswith("Q_ ="))
    assert stacked.outputs[0].dims == (None, None, None)


def test_copies_of_the_batch_joined_have_no_name_and_named_heads_keep_theirs():
    """The mechanism alone: four blocks of ``B`` whose features have no name are unnamed; the same split of a
    named ``D`` into ``d_k`` pieces stacks the heads on the batch, ``H*B`` (unchanged)."""
    x, seed = torch.randn(2, 6, 32), torch.randn(1, 3, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        seeds = seed.repeat(x.size(0), 1, 1)                               # (B, 3, 32)
        torch.cat(seeds.split(8, 2), 0)                                    # (4·B, 3, 8): blocks of B
        torch.cat(x.split(8, 2), 0)                                        # (H·B, T, d_k)
    assert [e.outputs[0].dims for e in t.events if e.op == "cat"] == [(None, None, None), ("H*B", "T", "d_k")]


# -- PVT: a strided reduction of the patch grid ------------------------------------------------------------

def test_pvt_reduced_grid_is_not_named_after_the_full_grid():
    """whai362/PVT's ``self.sr`` (a ``Conv2d`` with ``stride=sr_ratio``) makes a 3 x 2 grid of a declared 6 x 4
    one: 34f2dbd named its axes ``Hp`` and ``Wp`` (sizes 6 and 4); a8dba97 left them unnamed; its windows tile
    the grid (kernel = stride, no padding), so each axis is the full grid's coarse piece, as pooling names it."""
    t = traced(pvt, "", "B=2 T=24 Hp=6 Wp=4 D=32 H=4")
    conv = next(e for e in t.events if e.op == "conv2d")
    assert (conv.outputs[0].shape, conv.outputs[0].dims) == ((2, 32, 3, 2), ("B", "D", "Hp/2", "Wp/2"))


@pytest.mark.parametrize("dims", ["B=2 T=24 Hp=6 Wp=4 D=32 H=4", "B=4 T=16 Hp=4 Wp=4 D=32 H=4"])
def test_pvt_grid_read_without_its_permute_is_a_mix(dims):
    """``x.reshape(B, C, H, W)`` of token-major ``(B, N, C)`` rows, with the tokens declared (``T``): kept
    ``mixed-axis`` (34f2dbd said the same) now that the reduced grid has no name."""
    t = traced(pvt, "grid-no-permute", dims)
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert d.kind == "mixed-axis" and d.message.startswith("reshape #3 turns [B=")


# -- SD3 / MMDiT: two streams joined along the tokens -------------------------------------------------------

@pytest.mark.parametrize("dims", ["B=2 T=12 S=5 D=32 H=4", "B=4 T=4 S=5 D=32 H=4"])
def test_mmdit_values_joined_in_another_order_than_the_keys(dims):
    """diffusers' ``JointAttnProcessor2_0`` with ``value = torch.cat([encoder_value, value], dim=2)``: 34f2dbd
    ``✓ checked all 28 ops``."""
    t = traced(mmdit, "values-text-first", dims)
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert d.kind == "contracts-different-axes"
    assert "but the keys' axis -2 is T+S and the values' is S+T" in d.message


def test_mmdit_split_off_the_parts_is_not_proven_and_on_them_is():
    """The image stream cut ``[:, txt_len:]`` of ``T+S`` (Flux's text-first split on SD3's image-first join):
    34f2dbd ``✓``; the correct split on the parts' bounds keeps its ``✓``."""
    bug, twin = traced(mmdit, "split-text-first", "B=2 T=12 S=5 D=32 H=4"), traced(mmdit, "", "B=2 T=12 S=5 D=32 H=4")
    assert line(bug).startswith("? checked 28 of 28 ops that could carry a layout bug; not proven: #24 __getitem__ "
                                "cuts T+S off the bounds of its parts ((T+S)[0:5])")
    assert line(twin).startswith("✓ checked all 28 ops")


def test_a_matmul_over_two_orders_of_one_join_is_a_contraction_of_different_axes():
    """The eager twin of the SDPA contract: ``attn @ v`` whose keys were joined ``T+S`` and values ``S+T``;
    the same join on both sides is silent."""
    x, ctx = torch.randn(2, 6, 8), torch.randn(2, 3, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 S=3 d_k=8") as t:
        shapetrace.name(x, "B T d_k")
        shapetrace.name(ctx, "B S d_k")
        k, v = torch.cat([x, ctx], 1), torch.cat([ctx, x], 1)            # (B, T+S, d_k), (B, S+T, d_k)
        attn = (x @ k.transpose(1, 2)).softmax(-1)                         # (B, T, T+S)
        attn @ k                                                           # (B, T, d_k)
        attn @ v                                                           # bug: keys T+S, values S+T
    assert [(d.kind, t.events[d.event].code.split("#")[0].strip()) for d in t.diagnostics if d.severity == "error"] \
        == [("contracts-different-axes", "attn @ v")]


# -- every file of the round, at distinct sizes and at B = T = H = 4 ------------------------------------

_EITHER_ORDER = ("attends-over-batch", "projection-over-tokens")   # (each saying its names rest on the order)
#: (module, bug) -> for each size of ``_sizes(module)``: the verdict's first letter and the kinds of its
#: errors and warnings ("raises": the bug raises at those sizes). Still wrong, pinned as they are:
#: * fairseq and ChatGLM2 at B = T = H = 4: a sequence-first input [T, B, D] fits [B, T, D] too and nothing
#:   in the code settles which (:mod:`shapetrace.engine.readings`). A finding both readings make is kept; the
#:   false ``attends-over-batch`` is not, except on the two merges (fairseq without its transpose, ChatGLM2
#:   without its permute), where each reading finds another error and none both: the batch-first reading's
#:   errors are kept, each saying that its names rest on the order and what the sequence-first one finds;
#: * ``?`` on bugs: fairseq's scores viewed heads-first at B = H, DeBERTa's untransposed p2c and mirrored
#:   c2p index, PVT's reduced grid without its permute and its kv width cut heads-first (the strided
#:   conv's grid has no name), Linformer's projection without the transpose back and its softmax over the
#:   queries, MMDiT's split at the text's length (not proven: a cut of ``T+S`` off its parts' bounds),
#:   both Set Transformer bugs (the seeds' features have no name, so their heads stacked on the batch
#:   have none).
EXPECTED = {
    (fairseq_mha, ""): [("✓", ()), ("?", ()), ("✓", ()), ("?", ())],   # (B = H = 4: [T, B, D] fits alone)
    (fairseq_mha, "pad-on-queries"): [("✗", ("mask-wrong-axis", "nan-rows")), ("✗", ("nan-rows",)),
                                      ("✗", ("mask-wrong-axis", "nan-rows")), ("✗", ("nan-rows",))],
    (fairseq_mha, "scores-heads-first"): [("raises", ()), ("?", ()), ("?", ()), ("?", ())],
    (fairseq_mha, "merge-no-transpose"): [("✗", ("mixed-axis",)), ("✗", _EITHER_ORDER)] * 2,
    (deberta_v2, ""): [("?", ()), ("?", ())],
    (deberta_v2, "p2c-no-transpose"): [("?", ()), ("?", ())],
    (deberta_v2, "c2p-with-p2c-index"): [("?", ()), ("?", ())],
    # (? until the spatial reduction's tiling conv named the reduced grid Hp/2 × Wp/2 and a grid as many as
    # the tokens stopped being a second reading of them: propagate.conv, infer/seeds)
    (pvt, ""): [("✓", ())] * 2,
    (pvt, "grid-no-permute"): [("✗", ("mixed-axis",))] * 2,
    (pvt, "sr-no-permute"): [("✗", ("mixed-axis",))] * 2,
    (pvt, "kv-heads-first"): [("✓", ())] * 2,   # (a twin: GPT-NeoX's per-head fused layout, see the module)
    (linformer, ""): [("?", ()), ("?", ())],
    (linformer, "proj-no-transpose-back"): [("?", ()), ("?", ())],
    # (reports5: weights summed along another axis than their softmax's, rules/weights.weights_summed_elsewhere:
    # the softmax over the queries, the weighted sum over the projected keys; ? at 29918bb)
    (linformer, "softmax-queries"): [("✗", ("softmax-wrong-axis",)), ("?", ())],
    # (round 12: the class token joined to the patches is named by the join, infer/backward.joined_names, so
    # the block's ``u = cat((x_cls, x))`` is [B, 1+T, D] and the bug is found at the keys' reshape itself)
    (cait, ""): [("✓", ()), ("?", ())],
    (cait, "merge-no-transpose"): [("✓", ()), ("?", ())],
    (cait, "k-view-no-permute"): [("✗", ("mixed-axis",))] * 2,
    (mmdit, ""): [("✓", ()), ("?", ())],
    (mmdit, "split-text-first"): [("?", ()), ("?", ())],
    (mmdit, "values-text-first"): [("✗", ("contracts-different-axes",))] * 2,
    (retnet, ""): [("✓", ()), ("?", ())],
    (retnet, "decay-future"): [("✗", ("causal-mask-reversed",))] * 2,
    (retnet, "norm-over-heads"): [("✗", ("reduction-over-wrong-axis",))] * 2,
    (chatglm2, ""): [("?", ()), ("?", ())],
    (chatglm2, "rope-no-positions"): [("?", ()), ("?", ())],
    (chatglm2, "merge-no-permute"): [("✗", ("mixed-axis",)), ("✗", _EITHER_ORDER)],
    (chatglm2, "rope-batch-first"): [("✗", ("broadcast-mismatch",) * 2)] * 2,
    (chatglm2, "groups-tiled"): [("✗", ("gqa-head-order",))] * 2,
    (set_transformer, ""): [("?", ()), ("?", ())],
    (set_transformer, "merge-split-by-heads"): [("raises", ()), ("?", ())],
    (set_transformer, "softmax-seeds"): [("✗", ("softmax-wrong-axis",))] * 2,   # (? at 29918bb, as linformer)
}


CASES = [pytest.param(m, b, d, want, id=f"{name(m)}-{b or 'correct'}-{d.replace(' ', ',')}")
         for (m, b), wants in EXPECTED.items() for d, want in zip(_sizes(m), wants)]


@pytest.mark.parametrize("module,bug,dims,want", CASES)
def test_each_file_gets_its_verdict(module, bug, dims, want):
    assert _outcome(module, bug, dims) == want


def test_every_file_bug_and_twin_of_the_round_is_listed():
    assert {(m, b) for m, b in EXPECTED} == {(m, b) for m in MODULES for b in ("", *m.TWINS, *m.BUGS)}
    assert all(len(wants) == len(_sizes(m)) for (m, _), wants in EXPECTED.items())


def test_no_bug_of_the_round_gets_a_check_mark():
    """The bar: no ``✓`` on a buggy file (RetNet's transposed decay was one on 34f2dbd)."""
    marked = {(name(m), b) for (m, b), wants in EXPECTED.items() if b in m.BUGS for v, _ in wants if v == "✓"}
    assert marked == set()
