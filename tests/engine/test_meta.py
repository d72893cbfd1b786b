"""Meta-device tracing: shapes, strides and dtypes must equal real CPU execution, without torch._dynamo."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from shapetrace.app.devices import parse_memory, pick_device
from shapetrace.app.session import trace_reference
from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.memory import reference_bytes
from shapetrace.engine import meta
from shapetrace.engine.tracer import Trace, _shares_storage
from shapetrace.errors import UsageError


def _to_meta(t):
    if isinstance(t, torch.Tensor):
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
    if isinstance(t, (list, tuple)):
        return type(t)(_to_meta(x) for x in t)
    return t


def _flat(result):
    if isinstance(result, torch.Tensor):
        return [result]
    return [r for r in result if isinstance(r, torch.Tensor)]


def _compare(fn, *cpu_args):
    """Run ``fn`` on CPU and, under the tracer, on meta copies: same shapes, strides, dtypes."""
    torch.manual_seed(0)
    with torch.no_grad():
        with Trace():  # traced on CPU too: the mode itself changes some paths (MHA's fast path)
            expected = _flat(fn(*cpu_args))
        meta_args = [_to_meta(a) for a in cpu_args]
        with Trace() as t:
            got = _flat(fn(*meta_args))
    assert [tuple(g.shape) for g in got] == [tuple(e.shape) for e in expected]
    assert [g.stride() for g in got] == [e.stride() for e in expected]
    assert [g.dtype for g in got] == [e.dtype for e in expected]
    assert all(g.device.type == "meta" for g in got)
    return t


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


CASES = {
    "linear_bias": (lambda x, w, b: F.linear(x, w, b), r(2, 5, 8), r(6, 8), r(6)),
    "linear_transposed_input": (lambda x, w: F.linear(x.transpose(0, 1), w), r(5, 2, 8), r(6, 8)),
    "matmul_4d_kt": (lambda q, k: q @ k.transpose(-2, -1), r(2, 3, 5, 4), r(2, 3, 5, 4)),
    "matmul_broadcast": (lambda a, b: torch.matmul(a, b), r(2, 1, 5, 4), r(3, 4, 7)),
    "matmul_vec": (lambda a, b: a @ b, r(3, 4), r(4)),
    "bmm": (lambda a, b: torch.bmm(a, b), r(3, 5, 4), r(3, 4, 2)),
    "div_transposed": (lambda s: s.transpose(1, 2) / math.sqrt(4), r(2, 3, 5, 4)),
    "add_broadcast": (lambda a, b: a + b, r(2, 1, 5), r(3, 1)),
    "radd_scalar": (lambda a: 1 + a.transpose(0, 1), r(2, 3)),
    "mul_mixed_layouts": (lambda a, b: a.transpose(0, 1) * b, r(3, 4), r(4, 3)),
    "int_div": (lambda a: a / 2, torch.arange(6).view(2, 3)),
    "softmax_noncontig": (lambda s: torch.softmax(s.transpose(-2, -1), dim=-1), r(2, 3, 5, 5)),
    "F_softmax_dtype": (lambda s: F.softmax(s, dim=-1, dtype=torch.float64), r(2, 5)),
    "masked_fill": (lambda s, m: s.masked_fill(m, float("-inf")), r(2, 3, 5, 5),
                    torch.ones(5, 5, dtype=torch.bool).triu(1)),
    "where": (lambda m, s: torch.where(m, s, 0.0), torch.ones(5, 5, dtype=torch.bool), r(2, 5, 5)),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), r(2, 3, 5, 4), r(2, 3, 7, 4),
             r(2, 3, 7, 6)),
    "sdpa_transposed_views": (lambda q, k, v: F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True), r(2, 5, 3, 4),
        r(2, 5, 3, 4), r(2, 5, 3, 4)),
    "sdpa_mask": (lambda q, m: F.scaled_dot_product_attention(q.transpose(1, 2), q.transpose(1, 2),
                  q.transpose(1, 2), attn_mask=m), r(2, 5, 3, 4), torch.ones(5, 5, dtype=torch.bool)),
    "einsum_transposed": (lambda q, k: torch.einsum("bhtd,bhsd->bhts", q.transpose(1, 2), k.transpose(1, 2)),
                          r(2, 5, 3, 4), r(2, 7, 3, 4)),
    "sdpa_causal": (lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True), r(2, 3, 5, 4)),
    "sdpa_enable_gqa": (lambda q, k, v: F.scaled_dot_product_attention(  # 6 query heads share 2 kv heads
        q.transpose(1, 2), k, v, enable_gqa=True), r(2, 5, 6, 4), r(2, 2, 5, 4), r(2, 2, 5, 3)),
    "einsum_scores": (lambda q, k: torch.einsum("bhtd,bhsd->bhts", q, k), r(2, 3, 5, 4), r(2, 3, 7, 4)),
    "einsum_merge": (lambda w, v: torch.einsum("bhts,bhsd->bthd", w, v), r(2, 3, 5, 7), r(2, 3, 7, 4)),
    "einsum_proj": (lambda x, w: torch.einsum("btd,ed->bte", x, w), r(2, 5, 8), r(6, 8)),
    "cat": (lambda a, b: torch.cat([a, b], dim=-1), r(2, 3, 4), r(2, 3, 5)),
    "stack": (lambda a, b: torch.stack([a, b], dim=1), r(2, 3), r(2, 3)),
    "dropout_train": (lambda x: F.dropout(x.transpose(0, 1), 0.5, training=True), r(3, 4)),
    "dropout_eval": (lambda x: F.dropout(x, 0.5, training=False), r(3, 4)),
    "layer_norm": (lambda x: F.layer_norm(x.transpose(0, 1), (4,)), r(3, 2, 4)),
    "gelu_relu_exp": (lambda x: F.gelu(x.transpose(0, 1)) + F.relu(x.transpose(0, 1)).exp(), r(3, 4)),
    "tril": (lambda x: torch.tril(x), r(4, 4)),
    "sum_mean": (lambda x: (x.sum(-1), x.mean(dim=1, keepdim=True), x.amax(-1)), r(2, 3, 4)),
    "compare": (lambda a, b: a < b, r(2, 3), r(3)),
    "max_dim": (lambda x: x.max(dim=-1, keepdim=True), r(2, 3, 4)),
    "min_all_and_pairwise": (lambda x, y: (x.min(), torch.max(x, y)), r(2, 3), r(3)),
    "stable_softmax_by_hand": (lambda s: (s - s.max(-1, keepdim=True).values).exp()
                               / (s - s.max(-1, keepdim=True).values).exp().sum(-1, keepdim=True), r(2, 3, 5, 5)),
    "embedding": (lambda i, w: F.embedding(i, w), torch.tensor([[0, 1], [2, 0]]), r(3, 5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_meta_rule_matches_cpu(name):
    fn, *args = CASES[name]
    _compare(fn, *args)


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_module_matches_cpu(batch_first):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first).eval()
    x = r(2, 5, 8) if batch_first else r(5, 2, 8)
    with torch.no_grad():
        with Trace():  # untraced, batch_first takes a fused fast path the mode switches off
            out_cpu, w_cpu = mha(x, x, x)
        with torch.device("meta"):
            mha_meta = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first).eval()
        with Trace() as t:
            out, w = mha_meta(_to_meta(x), _to_meta(x), _to_meta(x))
    assert (tuple(out.shape), out.stride()) == (tuple(out_cpu.shape), out_cpu.stride())
    assert (tuple(w.shape), w.stride()) == (tuple(w_cpu.shape), w_cpu.stride())
    assert [e.op for e in t.events].count("bmm") == 2   # its inner ops, recorded one by one on meta too


layouts = st.integers(min_value=1, max_value=4).flatmap(lambda n: st.tuples(
    st.lists(st.integers(1, 4), min_size=n, max_size=n), st.permutations(list(range(n))),
    st.lists(st.booleans(), min_size=n, max_size=n), st.integers(0, n)))


@settings(max_examples=150, deadline=None)
@given(layouts, st.permutations([0, 1, 2, 3]))
def test_elementwise_strides_match_tensoriterator(layout, perm_b):
    shape, perm, ones, drop = layout
    a = torch.zeros([shape[p] for p in perm]).permute([perm.index(i) for i in range(len(shape))])
    b_shape = [1 if o else s for s, o in zip(shape, ones)][drop:]
    order = [p for p in perm_b if p < len(b_shape)]
    b = torch.zeros([b_shape[p] for p in order]).permute([order.index(i) for i in range(len(b_shape))])
    expected = a + b
    got = meta.compute("add", torch.add, (_to_meta(a), _to_meta(b)), {})
    assert tuple(got.shape) == tuple(expected.shape)
    assert got.stride() == expected.stride(), (a.stride(), b.shape, b.stride())


def test_meta_trace_equals_cpu_trace_for_the_reference():
    config = AttentionConfig()
    cpu, on_meta = trace_reference(config), trace_reference(config, "meta")
    for c, m in zip(cpu.events, on_meta.events, strict=True):
        assert (c.op, c.output.shape, c.output.stride, c.output.dims) == \
            (m.op, m.output.shape, m.output.stride, m.output.dims)
        assert (c.view, c.noop, c.alloc_bytes, c.copy_bytes) == (m.view, m.noop, m.alloc_bytes, m.copy_bytes)
    assert [d.to_dict() for d in cpu.diagnostics] == [d.to_dict() for d in on_meta.diagnostics]
    assert on_meta.events[0].output.device == "meta"


def test_meta_shape_errors_are_raised_like_torch():
    a, b = torch.empty(2, 6, 512, device="meta"), torch.empty(2, 6, 512, device="meta")
    with pytest.raises(RuntimeError, match="Expected size for first two dimensions of batch2"):
        with Trace():
            a @ b
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(12x512 and 256x128\)"):
        with Trace():
            F.linear(a, torch.empty(128, 256, device="meta"))
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        with Trace():
            torch.empty(2, 3, device="meta") + torch.empty(4, device="meta")


def test_view_detection_on_meta_uses_op_and_base_not_pointers():
    x = torch.empty(2, 6, 8, device="meta")
    w, b = torch.empty(8, 8, device="meta"), torch.empty(8, device="meta")
    y = F.linear(x, w, b)  # torch's own meta kernel: a view of a hidden [12, 8] buffer
    assert y._is_view() and y.untyped_storage().data_ptr() == 0
    assert not _shares_storage(y, [x])
    v = x.view(2, 6, 2, 4)
    assert _shares_storage(v, [x]) and _shares_storage(v.transpose(1, 2), [v])
    assert not _shares_storage(x.transpose(0, 1).contiguous(), [x])


def test_seventy_b_sized_meta_trace_loads_no_compiler_modules():
    code = (
        "import sys, torch\n"
        "from shapetrace.attention.config import AttentionConfig\n"
        "from shapetrace.app.session import trace_reference\n"
        "t = trace_reference(AttentionConfig(d_model=8192, heads=64, seq_len=32768, batch=8), 'meta')\n"
        "print(len(t.events), t.events[10].output.shape, t.events[10].output.nbytes,"
        " 'torch._dynamo' in sys.modules, 'sympy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["17", "(8,", "64,", "32768,", "32768)", str(2 * 2**40), "False", "False"]


def test_pick_device_and_memory_budget():
    assert parse_memory("1GiB") == 2**30 and parse_memory("512MB") == 512 * 10**6
    with pytest.raises(UsageError, match="cannot read --max-memory"):
        parse_memory("lots")
    small, big = AttentionConfig(), AttentionConfig(d_model=8192, heads=64, seq_len=32768, batch=8)
    assert reference_bytes(small) == 4 * (4 * 512 * 512 + 4 * 512 + 7 * 2 * 6 * 512 + 2 * 2 * 8 * 36)
    assert pick_device("auto", reference_bytes(small), 2**30)[0] == ("cuda" if torch.cuda.is_available() else "cpu")
    device, note = pick_device("auto", reference_bytes(big), 2**30)
    assert device == "meta" and "more than --max-memory 1 GiB" in note
    assert pick_device("meta", 1, 2**30)[0] == "meta"
    with pytest.raises(UsageError, match=r"real tensors would take about 4.1 TiB but this machine has .*"
                                          r"use --device meta"):
        pick_device("cpu", reference_bytes(big), 2**30)
    assert pick_device("cpu", 2**31, 2**30) == ("cpu", None)  # over budget but fits: the user asked
    with pytest.raises(UsageError, match="--device must be one of"):
        pick_device("gpu", 1, 1)


def test_run_device_meta_json_matches_cpu(cli):
    cpu = json.loads(cli("run", "--json").stdout)
    on_meta = json.loads(cli("run", "--json", "--device", "meta").stdout)
    assert on_meta.pop("notes") == ["on the meta device (--device meta): shapes and strides without data"]
    assert "notes" not in cpu
    # the dependency contracts are measured on values, which the meta device has none of: the verdict
    # says what held on the CPU and claims nothing there; everything else is the same
    cpu_verdict, meta_verdict = cpu.pop("verdict"), on_meta.pop("verdict")
    assert cpu_verdict["contracts"] == ["batch entries stay apart", "each token depends on itself", "heads stay apart"]
    assert meta_verdict["contracts"] == [] and cpu_verdict["unmeasured"] == []
    assert meta_verdict["unmeasured"] == ["the dependency contracts (the meta device has no values)"]
    checked = "✓ checked all 16 ops that could carry a layout bug: every axis keeps its meaning from input to output"
    assert meta_verdict["line"] == checked + "; not measured: the dependency contracts (the meta device has no values)"
    assert cpu_verdict["line"] == checked + "; held on the values: " + ", ".join(cpu_verdict["contracts"])
    assert {k: v for k, v in cpu_verdict.items() if k not in ("contracts", "line", "unmeasured")} == \
        {k: v for k, v in meta_verdict.items() if k not in ("contracts", "line", "unmeasured")}
    assert cpu == on_meta


def test_run_auto_meta_for_huge_config_prints_note(cli):
    res = cli("run", "--d-model", "8192", "--heads", "64", "--seq-len", "32768", "--batch", "8", "--width", "100")
    assert res.exit_code == 0
    assert "running on the meta device" in res.stdout
    assert "[B=8, H=64, T=32768, T=32768]" in res.stdout


def test_user_scripts_on_meta_load_no_compiler_modules():
    """Factories (torch.randn) under set_default_device('meta'), layer norms, MHA, sdpa, einsum."""
    code = (
        "import io, contextlib, sys\n"
        "from shapetrace import parse_dims\n"
        "from shapetrace.app.script import run_script\n"
        "for name in ['textbook', 'gqa', 'einops_style', 'encoder_layer', 'torch_mha', 'misc_styles']:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        r = run_script(f'tests/scripts/{name}.py', [], parse_dims('B=3,T=6,D=512,H=8,H_kv=2'), 'meta')\n"
        "    assert r.exception is None and r.trace.events[0].inputs[0].device == 'meta', name\n"
        "print('torch._dynamo' in sys.modules, 'sympy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


matmul_shapes = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3),
                          st.integers(1, 3), st.lists(st.integers(1, 3), max_size=2),
                          st.lists(st.integers(1, 3), max_size=2), st.booleans())


@settings(max_examples=120, deadline=None)
@given(matmul_shapes)
def test_matmul_shapes_and_errors_match_torch(case):
    n, m, k, k2, p, batch_a, batch_b, vec = case
    a_shape = (k,) if vec else tuple(batch_a) + (n, k)
    b_shape = tuple(batch_b) + (k2, m)
    a, b = torch.zeros(a_shape), torch.zeros(b_shape)
    try:
        expected = a @ b
    except RuntimeError:
        with pytest.raises(RuntimeError):
            meta.compute("matmul", torch.matmul, (_to_meta(a), _to_meta(b)), {})
        return
    got = meta.compute("matmul", torch.matmul, (_to_meta(a), _to_meta(b)), {})
    assert (tuple(got.shape), got.stride()) == (tuple(expected.shape), expected.stride())


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reductions_match_torch(shape, data):
    x = torch.zeros(shape)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    for op in ("sum", "mean", "amax"):
        expected = getattr(torch, op)(x, dim, keepdim=keepdim)
        got = meta.compute(op, getattr(torch, op), (_to_meta(x), dim), {"keepdim": keepdim})
        assert (tuple(got.shape), got.stride(), got.dtype) == (tuple(expected.shape), expected.stride(), expected.dtype)
