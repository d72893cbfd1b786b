"""Fresh vision attention files, one per public source (tests/corpus/vision/, each citing its code), traced
as a held-out set would trace them (issue 33, items 2-4): MaxViT's grid after its blocks, the Differential
Transformer's 2·H half-heads, MAE's masking and unshuffle, CrossViT's branch projections, DiT's final
patch projection, Swin's shifted windows; and their bugs in the style of public reports, none with a ✓."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from tests.corpus.vision import crossvit, diff_transformer, dit, mae, maxvit, segformer, swin, timm_vit


def traced(module, bug: str, dims: str, names: tuple = (), **sizes):
    model, inputs = module.build(bug, **sizes) if sizes else module.build(bug)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        for tensor, name in zip(inputs, names):
            shapetrace.name(tensor, name)
        model(*inputs)
    return t


def on_line(t, text: str):
    """The events recorded on the source line that contains ``text``, in order."""
    return [e for e in t.events if text in e.code]


def errors(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.severity == "error"]


# -- MaxViT: a grid cut of a map whose blocks were merged back -------------------------------------------

@pytest.mark.parametrize("bug,side,grid", [
    ("", (4, 6), ("B", "Hp%2", "Wp%3", "Hp/2", "Wp/3", "D")),
    ("", (4, 4), ("B", "Hp%2", "Wp%2", "Hp/2", "Wp/2", "D")),     # Hp = Wp = 4, and 2 × 2 windows
])
def test_maxvit_grid_after_blocks_names_its_pieces(bug, side, grid):
    """lucidrains/vit-pytorch max_vit.py: ``'b d (x w1) (y w2) -> ...'`` then back, then the grid
    ``'b d (w1 x) (w2 y) -> b x y w1 w2 d'``. Main read the map merged back from its blocks as two
    pieces of Wp and called the grid's other cut of them a mix of tokens (✗ mixed-axis on correct code)."""
    model = maxvit.MaxViTBlock().eval()
    x = torch.randn(2, 24, *side)
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=24 H=3") as t:
        shapetrace.name(x, "B D Hp Wp")
        model(x)
    assert on_line(t, "(w1 x) (w2 y) -> b x y w1 w2 d")[-1].outputs[0].dims == grid
    assert on_line(t, '"b x y w1 w2 d -> b d (w1 x) (w2 y)"')[-1].outputs[0].dims == ("B", "D", "Hp", "Wp")
    assert errors(t) == []


def test_maxvit_grid_written_as_a_second_block_gets_no_check_mark():
    """The copy-paste slip: the grid step written with the block pattern (both attentions see the same
    windows). Nothing names it wrong; the relative-position bias is not proven either: no ✓."""
    t = traced(maxvit, "grid-as-block", "B=2 D=24 H=3", names=("B D Hp Wp",))
    assert not t.report().verdict.line.startswith("✓")


# -- the Differential Transformer: 2·H half-heads beside H value heads -----------------------------------

@pytest.mark.parametrize("dims,sizes", [
    ("B=2 T=6 D=48 H=3", {"B": 2, "T": 6, "D": 48, "H": 3}),
    ("B=4 T=4 D=64 H=4", {"B": 4, "T": 4, "D": 64, "H": 4}),     # B = T = H = 4
])
def test_half_heads_beside_value_heads_are_not_a_size_disagreement(dims, sizes):
    """microsoft/unilm Diff-Transformer multihead_diffattn.py: q and k viewed as 2·H heads of d_k/2, v as
    H heads of d_k, the maps paired ``view(B, H, 2, T, T)``. Main said ``dims-disagree`` ("did you mean
    H=6?") and its note blocked the ✓; the sums of the λ parameters counted as unchecked ops."""
    t = traced(diff_transformer, "", dims, names=("B T D",), **sizes)
    assert [d.kind for d in t.diagnostics] == []
    assert on_line(t, "view(bsz, self.num_heads, 2, tgt_len, src_len)")[-1].outputs[0].dims[1] == "H"
    line = t.report().verdict.line
    assert line.startswith("✓ checked all 21 ops"), line


def test_half_heads_merged_without_their_transpose_is_an_error():
    """The classic merge slip in the Differential Transformer's style: ``attn.reshape(bsz, tgt_len, ...)``
    on ``[B, H, T, 2d]`` without ``transpose(1, 2)``."""
    t = traced(diff_transformer, "no-transpose", "B=2 T=6 D=48 H=3")
    assert "mixed-axis" in errors(t)


def test_ops_on_parameters_alone_are_not_counted():
    """``torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1))``: no input's data passes through
    it and it makes one number; a sum over the input's features still counts, and so does a class token
    expanded from a parameter (it has a layout that meets the patches: tests/scripts/tiny_vit.py)."""
    lam = nn.Parameter(torch.randn(8))
    x = torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        scale = torch.exp(torch.sum(lam * lam, dim=-1))
        (x * scale).sum(dim=-1)
    by_op = {e.op: e for e in t.events}
    assert by_op["sum"].from_parameters is False and t.events[0].from_parameters is True
    verdict = t.report().verdict
    assert (verdict.checked, verdict.total, verdict.mark) == (1, 1, "✓")
    cls = nn.Parameter(torch.randn(1, 1, 8))
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=8") as t:
        cls.expand(2, -1, -1)
    assert t.report().verdict.total == 1


# -- MAE: the masking and the unshuffle ------------------------------------------------------------------

def test_mae_slice_of_a_join_is_named_by_its_parts():
    """facebookresearch/mae models_mae.py ``forward_decoder``: ``x[:, 1:, :]`` of the ``1+N[ids_keep]``
    tokens is the kept patches, ``N[ids_keep]``; the mask tokens ``repeat(x.shape[0], ...)`` are one per
    batch entry; the joins keep their order. Main named the slice ``1+N[ids_keep][1:5]`` (read as
    1 + 4 = 5 tokens of 4) and the join ``N[ids_keep][1:5]+13`` (of 16: 12 mask tokens). The decoder's
    width (36, ``decoder_embed``'s) is ``F``, a width its projection made that no declared name has
    (unnamed before lib13), and so is the mask tokens' width, joined along the tokens with it."""
    t = traced(mae, "", "B=2 N=16 D=24 H=3")
    dims = [e.outputs[0].dims for e in on_line(t, "x_ = torch.cat([x[:, 1:, :], mask_tokens], dim=1)")]
    assert dims == [("B", "N[ids_keep]", "F"), ("B", "N[ids_keep]+12", "F")]
    assert on_line(t, "mask_tokens = self.mask_token.repeat")[-1].outputs[0].dims == ("B", "12", "F")
    assert on_line(t, "index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))  # unshuffle")[-1] \
        .outputs[0].dims == ("B", "(N[ids_keep]+12)[ids_restore]", "F")
    assert on_line(t, "x = torch.cat([x[:, :1, :], x_], dim=1)")[-1].outputs[0].dims[:2] == \
        ("B", "1+(N[ids_keep]+12)[ids_restore]")


def test_mae_unshuffle_along_the_features_keeps_the_parts_in_order_and_gets_no_check_mark():
    """The unshuffle gathered along ``dim=2``: the tokens stay shuffled. The class token in front, the
    kept patches, the 12 mask tokens: ``1+N[ids_keep]+12`` (main: ``13+N[ids_keep]``)."""
    t = traced(mae, "restore-wrong-axis", "B=2 N=16 D=24 H=3")
    assert on_line(t, "x = torch.cat([x[:, :1, :], x_], dim=1)")[-1].outputs[0].dims[:2] == ("B", "1+N[ids_keep]+12")
    assert not t.report().verdict.line.startswith("✓")


@pytest.mark.parametrize("decoder_dim", [36, 16])   # 16: the decoder's width equals the 16 patches
def test_mae_unshuffle_along_the_features_is_an_error_and_the_right_axis_is_silent(decoder_dim):
    """The restore indices come from ``ids_restore = torch.argsort(ids_shuffle, dim=1)``, which counts the
    patches (``noise = torch.rand(N, L)`` with ``L`` read from the tokens axis). Gathered along ``dim=2``
    (the decoder's features) they reorder features by patch positions: ``index-wrong-axis`` on the gather,
    whatever the decoder's width (main: ``?`` and no finding). ``dim=1`` (facebookresearch/mae) is silent."""
    found = {}
    for bug in ("", "restore-wrong-axis"):
        torch.manual_seed(0)
        model = mae.MaskedAutoencoder(decoder_dim=decoder_dim, bug=bug).eval()
        with torch.no_grad(), shapetrace.trace(dims="B=2 N=16 D=24 H=3") as t:
            model(torch.randn(2, 3, 16, 16))
        found[bug] = [d for d in t.diagnostics if d.severity != "note"]
    assert found[""] == []
    [d] = found["restore-wrong-axis"]
    e = t.events[d.event]
    assert (d.kind, e.op) == ("index-wrong-axis", "gather")
    width = "F" if decoder_dim == 36 else "unnamed"   # (36: decoder_embed's own width; 16 is also N's size)
    shown = f"F={decoder_dim}" if decoder_dim == 36 else f"{decoder_dim}"
    assert d.message == (
        f"gather #{e.index} picks along axis 2 ({width}) of [B=2, N[ids_keep]+12=16, {shown}] with indices "
        "that count N (tokens): argsort made them along N. Its tokens axis is axis 1 (N[ids_keep]+12), so the "
        "pick reorders other values by positions of N.")
    assert d.fix == "Pick along the axis the indices count: dim=1 (e.g. torch.gather(x, dim=1, index=...))."


# -- projections to a width that only sizes read as one head's k and v -----------------------------------

CROSS_DIMS = "B=2 T=5 S=9 D=36 H=3 C:features=24"


def test_crossvit_projection_back_to_the_small_branch_is_not_a_kv_stack():
    """IBM/CrossViT crossvit.py: the large branch's class token projected back to the small width (24 =
    2·d_k at d_k = 12) and joined to the small branch's patches. Main named the width ``2*d_k`` and
    ended ``✗ join-mismatch`` on correct code. Since round 12 the projected token is named ``C`` by the join
    that puts it before the small branch's patches (infer/backward.joined_names: a join lines every other axis
    up position by position), never ``2*d_k``."""
    t = traced(crossvit, "", CROSS_DIMS, names=("B T C", "B S D"))
    assert errors(t) == []
    assert on_line(t, "reverted = self.revert(tmp)")[-1].outputs[0].dims == ("B", "S[0:1]", "C")


def test_crossvit_keys_reshaped_without_permute_is_an_error():
    t = traced(crossvit, "no-permute", CROSS_DIMS, names=("B T C", "B S D"))
    assert "mixed-axis" in errors(t)


def test_dit_final_patch_projection_is_not_a_kv_stack():
    """facebookresearch/DiT models.py: ``FinalLayer`` projects D = 24 to p·p·c = 16 (= 2·d_k at H = 3), and
    ``unpatchify`` moves those features into pixels. Main read 16 as k and v of one head and called the
    unpatchify a mix of tokens (✗ mixed-axis on correct code)."""
    t = traced(dit, "", "B=2 T=16 D=24 H=3")
    assert errors(t) == []
    assert on_line(t, "return self.unpatchify(self.final(x))")[0].outputs[0].dims == ("B", "N", None)


def test_multi_query_kv_projection_still_reads_as_one_heads_k_and_v():
    """The twin: a module that says it is a k/v projection (``wkv``, as in tests/styles/mqa.py) keeps
    ``2*d_k``."""
    class KeyValue(nn.Module):
        def __init__(self):
            super().__init__()
            self.wkv = nn.Linear(32, 16)    # one key head and one value head of d_k = 8

        def forward(self, x):
            return self.wkv(x)

    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        KeyValue()(torch.randn(2, 6, 32))
    assert t.events[0].outputs[0].dims == ("B", "T", "2*d_k")


# -- Swin: bugs in the style of public reports -----------------------------------------------------------

@pytest.mark.parametrize("bug", ["swap-hw", "no-unroll", "index-transposed"])
def test_swin_bugs_get_no_check_mark(bug):
    """microsoft/Swin-Transformer swin_transformer.py on a 4 × 6 image: ``window_reverse`` viewing the
    windows as (B, W/ws, H/ws, ...), the reverse roll left out, the relative-position bias read
    key-by-query. None may end in ✓ (the first is an error)."""
    t = traced(swin, bug, "B=2 T=24 D=36 H=3")
    line = t.report().verdict.line
    assert not line.startswith("✓"), line
    if bug == "swap-hw":
        assert "mixed-axis" in errors(t)


# -- Swin: windows named by the grid they cut, when the grid is declared ----------------------------------

@pytest.mark.parametrize("dims,sizes,windows,window", [
    ("B=2 T=24 D=36 H=3 Hp=4 Wp=6", {"B": 2, "H": 4, "W": 6, "dim": 36, "heads": 3},
     ("B*Hp/2*Wp/2", "Hp%2", "Wp%2", "D"), ("B*Hp/2*Wp/2", "H", "Hp%2*Wp%2", "d_k")),
    # B = Hp = Wp = H = 4, and ws·ws = 4 as well
    ("B=4 T=16 D=16 H=4 Hp=4 Wp=4", {"B": 4, "H": 4, "W": 4, "dim": 16, "heads": 4},
     ("B*Hp/2*Wp/2", "Hp%2", "Wp%2", "D"), ("B*Hp/2*Wp/2", "H", "Hp%2*Wp%2", "d_k")),
])
def test_swin_windows_are_named_by_the_grid_they_cut(dims, sizes, windows, window):
    """microsoft/Swin-Transformer ``window_partition`` on tokens declared as a grid (``--dims Hp=4 Wp=6``
    beside ``T``): the windows batched with the batch are ``B·Hp/2·Wp/2`` (B·nW) and each window's
    tokens ``Hp%2·Wp%2`` (ws·ws). Main read them as pieces of T, ``B*T/12*T/2%3`` and ``T/6%2*T%2``, and
    the column pieces of a grid of N as ``N/2%3`` and ``N%2``."""
    t = traced(swin, "", dims, names=("B T D",), **sizes)
    assert on_line(t, "windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size")[-1] \
        .outputs[0].dims == windows
    assert on_line(t, "q, k, v = qkv[0], qkv[1], qkv[2]")[0].outputs[0].dims == window
    assert on_line(t, "x = x.view(B, H * W, C)")[-1].outputs[0].dims == ("B", "T", "D")
    assert errors(t) == []


def test_a_grid_of_n_names_its_columns_pieces_by_the_column():
    """The same cut of ``[B, N, D]`` tokens from a patch grid (``Hp``, ``Wp`` declared): ``Wp/2``, ``Wp%2``."""
    x = torch.randn(2, 24, 8)
    with shapetrace.trace(dims="B=2 N=24 D=8 Hp=4 Wp=6") as t:
        x.view(2, 2, 2, 3, 2, 8)                                      # (B, Hp/2, Hp%2, Wp/2, Wp%2, D)
    assert t.events[0].outputs[0].dims == ("B", "Hp/2", "Hp%2", "Wp/2", "Wp%2", "D")


@pytest.mark.parametrize("dims,sizes,said", [
    ("B=2 T=24 D=36 H=3", {"B": 2, "H": 4, "W": 6, "dim": 36, "heads": 3}, "T/6 by -1 and T%6 by -1"),
    ("B=4 T=16 D=16 H=4", {"B": 4, "H": 4, "W": 4, "dim": 16, "heads": 4}, "T/4 by -1 and T%4 by -1"),
])
def test_swin_without_its_roll_back_is_an_error(dims, sizes, said):
    """microsoft/Swin-Transformer ``SwinTransformerBlock.forward`` with the second ``torch.roll`` left out
    (the slip behind Swin re-implementation reports whose outputs drift by one window shift): the
    residual adds each token to the attention output of its neighbour. Main: ``?``, nothing said."""
    t = traced(swin, "no-unroll", dims, names=("B T D",), **sizes)
    found = [d for d in t.diagnostics if d.kind == "roll-not-undone"]
    assert len(found) == 1 and found[0].message.startswith(f"roll #{found[0].event} shifts {said}, ")
    assert t.events[found[0].event].code.lstrip().startswith("shifted_x = torch.roll(x, shifts=(-self.shift_size")


@pytest.mark.parametrize("dims,sizes", [
    ("B=2 T=24 D=36 H=3", {"B": 2, "H": 4, "W": 6, "dim": 36, "heads": 3}),
    ("B=4 T=16 D=16 H=4", {"B": 4, "H": 4, "W": 4, "dim": 16, "heads": 4}),
])
def test_swin_with_its_roll_back_is_silent(dims, sizes):
    t = traced(swin, "", dims, names=("B T D",), **sizes)
    assert errors(t) == []


# -- files that the engine already reads right: guards, each with its bug ----------------------------------

@pytest.mark.parametrize("module,bug", [(timm_vit, "pool-over-batch"), (segformer, "dwconv-view")])
def test_timm_and_segformer_are_read_without_a_false_finding_and_their_bugs_get_no_check_mark(module, bug):
    """timm's ``VisionTransformer`` (class token, ``qkv.reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``,
    per-head q/k norms, average pool) and transformers' SegFormer layer (keys from a strided conv, a
    depthwise conv in the Mix-FFN): no error or warning on the published code (both ✓); the average
    pool taken over the batch and the Mix-FFN's map made by a view without its transpose: no ✓."""
    t = traced(module, "", "B=2 N=16 D=24 H=3")
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    assert t.report().verdict.mark == "✓"   # (timm: ? -> ✓ in round 49, its class head's width the weight's rows)
    assert traced(module, bug, "B=2 N=16 D=24 H=3").report().verdict.mark != "✓"
