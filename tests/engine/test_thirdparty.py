"""Code shapetrace did not write: each attention style in tests/scripts/ traces with exact shapes,
strides and names, and no false error or warning."""

from __future__ import annotations

import pytest
from conftest import ROOT

from shapetrace import parse_dims
from shapetrace.app.script import run_script

SCRIPTS = ROOT / "tests" / "scripts"
HEADS = ("B", "H", "T", "d_k")


def traced(name: str, dims: str, *args: str, device: str = "cpu"):
    run = run_script(str(SCRIPTS / name), list(args), parse_dims(dims), device)
    assert run.exception is None, run.exception
    return run.trace


def facts(trace, ops=None):
    """(op, shape, stride, names, view) for each event (or those whose op is in ``ops``)."""
    return [(e.op, e.output.shape, e.output.stride, e.output.dims, e.view)
            for e in trace.events if ops is None or e.op in ops]


def no_false_alarm(trace, allowed_notes=()):
    bad = [d for d in trace.diagnostics if d.severity != "note" or d.kind not in allowed_notes]
    assert not bad, [d.to_dict() for d in bad]


def test_fused_qkv_split_and_view():
    t = traced("fused_qkv.py", "B=2,T=6,D=512,H=8")
    f = facts(t)
    assert f[0] == ("linear", (2, 6, 1536), (9216, 1536, 1), ("B", "T", "3*D"), False)
    assert f[1] == ("split", (2, 6, 512), (9216, 1536, 1), ("B", "T", "D"), True)
    assert [o.storage_offset for o in t.events[1].outputs] == [0, 512, 1024]
    assert f[2] == ("view", (2, 6, 8, 64), (9216, 1536, 64, 1), ("B", "T", "H", "d_k"), True)
    assert f[3] == ("transpose", (2, 8, 6, 64), (9216, 64, 1536, 1), HEADS, True)
    assert f[9] == ("matmul", (2, 8, 6, 6), (288, 36, 6, 1), ("B", "H", "T", "T"), False)
    # a mask made here from T of ``B, T, C = x.size()``: the sizes carry their axis (engine/sizes.py)
    assert f[10] == ("tril", (6, 6), (6, 1), ("T", "T"), False)
    assert f[11][0] == "masked_fill" and f[12][0] == "softmax"
    assert f[15] == ("contiguous", (2, 6, 8, 64), (3072, 512, 64, 1), ("B", "T", "H", "d_k"), False)
    assert t.events[15].copy_bytes == 2 * 6 * 512 * 4
    assert f[16] == ("view", (2, 6, 512), (3072, 512, 1), ("B", "T", "D"), True)
    no_false_alarm(t)


def test_permute_0213_split_and_merge():
    t = traced("permute_style.py", "B=2,T=6,D=512,H=8")
    permutes = facts(t, {"permute"})
    assert permutes[0] == ("permute", (2, 8, 6, 64), (3072, 64, 512, 1), HEADS, True)
    assert permutes[3] == ("permute", (2, 8, 64, 6), (3072, 64, 1, 512), ("B", "H", "d_k", "T"), True)
    assert permutes[4] == ("permute", (2, 6, 8, 64), (3072, 64, 384, 1), ("B", "T", "H", "d_k"), True)
    last = t.events[-1]
    assert (last.op, last.output.dims, last.view, last.copy_bytes) == ("reshape", ("B", "T", "D"), False, 24576)
    no_false_alarm(t)


def test_timm_reshape_permute_unbind():
    t = traced("timm_style.py", "B=2,N=6,D=512,H=8")
    f = facts(t)
    assert f[1] == ("reshape", (2, 6, 3, 8, 64), (9216, 1536, 512, 64, 1), ("B", "N", "qkv", "H", "d_k"), True)
    assert f[2] == ("permute", (3, 2, 8, 6, 64), (512, 9216, 64, 1536, 1), ("qkv", "B", "H", "N", "d_k"), True)
    unbind = t.events[3]
    assert [o.dims for o in unbind.outputs] == [("B", "H", "N", "d_k")] * 3
    assert [o.storage_offset for o in unbind.outputs] == [0, 512, 1024]
    assert f[5] == ("matmul", (2, 8, 6, 6), (288, 36, 6, 1), ("B", "H", "N", "N"), False)
    assert f[9] == ("reshape", (2, 6, 512), (3072, 512, 1), ("B", "N", "D"), False)
    no_false_alarm(t)



def test_grouped_query_attention_without_h_kv_names_no_kv_stack():
    """meta-llama/llama's ``Attention`` (``self.wk = ColumnParallelLinear(dim, n_kv_heads * head_dim)``): with
    H_kv undeclared, the key projection's width 2·64 is two kv heads, not a k/v stack; its view
    ``[B, T, 2, d_k]`` was printed ``[B, T, kv=2, d_k]``. A projection named as keys alone holds no
    stack, so the width and its pieces stay unnamed (the queries keep every name)."""
    t = traced("gqa.py", "B=3,T=6,D=512,H=8")
    f = facts(t)
    assert f[1] == ("view", (3, 6, 8, 64), (3072, 512, 64, 1), ("B", "T", "H", "d_k"), True)
    assert f[3] == ("linear", (3, 6, 128), (768, 128, 1), ("B", "T", None), False)
    assert f[4] == ("view", (3, 6, 2, 64), (768, 128, 64, 1), ("B", "T", None, None), True)
    assert f[7] == ("view", (3, 6, 2, 64), (768, 128, 64, 1), ("B", "T", None, None), True)
    assert not [e.index for e in t.events if any(n in ("kv", "qkv") for n in e.output.dims)]
    no_false_alarm(t)

def test_einops_rearrange_and_einsum():
    t = traced("einops_style.py", "B=2,T=6,D=512,H=8")
    ops = [e.op for e in t.events]
    assert ops == ["linear", "chunk"] + ["reshape", "permute"] * 3 + ["einsum", "softmax", "einsum",
                                                                      "permute", "reshape", "linear"]
    assert facts(t, {"einsum"}) == [
        ("einsum", (2, 8, 6, 6), (288, 36, 6, 1), ("B", "H", "T", "T"), False),
        ("einsum", (2, 8, 6, 64), (3072, 384, 64, 1), HEADS, False)]
    assert t.events[3].output.dims == HEADS and t.events[3].source.endswith("einops_style.py:17")
    assert t.events[12].output.dims == ("B", "T", "D")
    no_false_alarm(t)


def test_grouped_query_attention_expand_reshape():
    t = traced("gqa.py", "B=3,T=6,D=512,H=8,H_kv=2")
    f = facts(t)
    assert f[3] == ("linear", (3, 6, 128), (768, 128, 1), ("B", "T", "D_kv"), False)
    assert f[5] == ("transpose", (3, 2, 6, 64), (768, 64, 128, 1), ("B", "H_kv", "T", "d_k"), True)
    assert f[10] == ("expand", (3, 2, 4, 6, 64), (768, 64, 0, 128, 1), ("B", "H_kv", "n_rep", "T", "d_k"), True)
    assert f[11] == ("reshape", (3, 8, 6, 64), (3072, 384, 64, 1), HEADS, False)
    assert t.events[11].copy_bytes == 3 * 8 * 6 * 64 * 4
    sdpa = t.events[15]
    assert (sdpa.op, sdpa.output.dims, sdpa.output.stride) == (
        "scaled_dot_product_attention", HEADS, (3072, 64, 512, 1))
    no_false_alarm(t)


def test_sdpa_output_layout_from_torch():
    t = traced("sdpa_style.py", "B=2,T=6,D=512,H=8")
    sdpa = t.events[6]
    assert (sdpa.op, sdpa.output.shape, sdpa.output.stride, sdpa.output.dims, sdpa.output.contiguous) == (
        "scaled_dot_product_attention", (2, 8, 6, 64), (3072, 64, 512, 1), HEADS, False)
    assert facts(t)[-1] == ("reshape", (2, 6, 512), (3072, 512, 1), ("B", "T", "D"), True)
    no_false_alarm(t)


@pytest.mark.parametrize("batch_first", [False, True])
def test_nn_multihead_attention_is_opened_up(batch_first):
    """torch's own attention shows its in-projection packing, seq-first layout and B·H batching."""
    if batch_first:
        t = traced("torch_mha.py", "B=2,T=6,D=512,H=8", "--batch-first")
        assert facts(t)[0] == ("transpose", (6, 2, 512), (512, 3072, 1), ("T", "B", "D"), True)
        inner = t.events[1:-1]
        assert facts(t)[-1] == ("transpose", (2, 6, 512), (512, 1024, 1), ("B", "T", "D"), True)
    else:
        t = traced("torch_mha.py", "B=2,T=6,D=512,H=8")
        inner = t.events
    names = [(e.op, e.output.dims) for e in inner]
    assert names[:6] == [
        ("linear", ("T", "B", "3*D")), ("unflatten", ("T", "B", "qkv", "D")),
        ("unsqueeze", (None, "T", "B", "qkv", "D")), ("transpose", ("qkv", "T", "B", None, "D")),
        ("squeeze", ("qkv", "T", "B", "D")), ("contiguous", ("qkv", "T", "B", "D"))]
    assert ("view", ("T", "B*H", "d_k")) in names and ("transpose", ("B*H", "T", "d_k")) in names
    scores = next(e for e in inner if e.op == "bmm")
    assert (scores.output.shape, scores.output.dims) == ((16, 6, 6), ("B*H", "T", "T"))
    assert [a.role for a in scores.output.axes] == [None, "query", "key"]
    weights = [e for e in inner if e.op == "mean"][-1]
    assert (weights.output.shape, weights.output.dims) == ((2, 6, 6), ("B", "T", "T"))
    assert "multi_head_attention_forward" not in [e.op for e in t.events]
    no_false_alarm(t)


def test_transformer_encoder_layer():
    t = traced("encoder_layer.py", "B=2,T=6,D=512,H=8")
    ops = [e.op for e in t.events]
    assert ops[:3] == ["transpose", "linear", "unflatten"] and ops.count("scaled_dot_product_attention") == 1
    assert ops[-7:] == ["dropout", "layer_norm", "linear", "dropout", "linear", "dropout", "layer_norm"]
    f = facts(t)
    assert f[-5] == ("linear", (2, 6, 1024), (6144, 1024, 1), ("B", "T", "2*D"), False)
    assert f[-3] == ("linear", (2, 6, 512), (3072, 512, 1), ("B", "T", "D"), False)
    assert f[-1][:4] == ("layer_norm", (2, 6, 512), (3072, 512, 1), ("B", "T", "D"))
    sdpa = next(e for e in t.events if e.op == "scaled_dot_product_attention")
    assert [i.dims for i in sdpa.inputs[:3]] == [HEADS] * 3
    no_false_alarm(t)


def test_assorted_idioms_named_from_dims_alone():
    t = traced("misc_styles.py", "B=3,T=6,D=512,H=8,H_kv=2")
    names = [(e.op, e.output.dims) for e in t.events]
    assert names == [
        ("view", ("B", "T", "qkv", "H", "d_k")), ("__getitem__", ("B", "T", "H", "d_k")),
        ("transpose", HEADS), ("reshape", ("B", "T", "qkv", "H", "d_k")),
        ("permute", ("qkv", "B", "H", "T", "d_k")), ("__getitem__", ("B", "T", "H", "d_k")),
        ("__getitem__", ("B", "T", "H", "d_k")), ("einsum", ("B", "H", "T", "T")),
        ("view", ("B", "T", "H_kv", "d_k")), ("transpose", ("B", "H_kv", "T", "d_k")),
        ("repeat_interleave", HEADS), ("unflatten", ("B", "T", "H", "d_k")), ("transpose", HEADS),
        ("transpose", ("B", "T", "H", "d_k")), ("flatten", ("B", "T", "D")),
        ("tril", (None, None)), ("view", (None, None, None, None)), ("transpose", ("B", "H", "d_k", "T")),
        ("matmul", ("B", "H", "T", "T")), ("__getitem__", (None, None, None, None)),
        ("masked_fill", ("B", "H", "T", "T")), ("softmax", ("B", "H", "T", "T"))]
    assert t.diagnostics == []


def test_unnamed_tensors_split_without_a_false_head_split_note():
    from shapetrace.engine.axes import unknown_axes
    from shapetrace.engine.axis_reshape import reshape_axes
    from shapetrace.engine.namer import Namer

    namer = Namer({"B": 2, "T": 6, "D": 512, "H": 8})
    split = reshape_axes(unknown_axes((2, 6, 1536)), (2, 6, 3, 8, 64), namer)
    assert [namer.mix_kind(a) for a in split] == [None] * 5
    assert [namer.label(a) for a in split] == [None] * 5


def test_fused_width_seeds_names_after_the_token_prefix():
    import torch

    from shapetrace.engine.tracer import Trace

    t = Trace({"B": 3, "T": 6, "D": 512, "H": 8, "H_kv": 2})
    assert t.namer.label(t.axes_of(torch.zeros(3, 6, 1536))[2]) == "3*D"
    assert t.namer.label(t.axes_of(torch.zeros(3, 6, 128))[2]) == "D_kv"
    seq_first = t.axes_of(torch.zeros(6, 3, 1536))   # distinct sizes: a seq-first [T, B, 3*D] input
    assert [t.namer.label(a) for a in seq_first] == ["T", "B", "3*D"]
    assert t.axes_of(torch.zeros(5, 3, 1536))[0].atoms[0].root == "?"  # no declared size fits: unnamed


def test_mha_per_head_weights_are_named():
    import torch

    import shapetrace

    mha = torch.nn.MultiheadAttention(512, 8, batch_first=True).eval()
    x = torch.randn(2, 6, 512)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        _, weights = mha(x, x, x, average_attn_weights=False)
    last = [e for e in t.events if e.output is not None and e.output.shape == tuple(weights.shape)][-1]
    assert (last.op, last.output.dims) == ("view", ("B", "H", "T", "T"))
    assert [a.role for a in last.output.axes] == [None, None, "query", "key"]


