"""Attention variants: config validation, implementations vs reference, masks, cross-attention,
GQA, NaN rows, dropout, torch's MultiheadAttention, presets and the meta switch."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, render

from shapetrace.app.devices import budget_or_default, pick_device
from shapetrace.app.session import trace_variant
from shapetrace.attention import variants
from shapetrace.attention.config import AttentionConfig as C
from shapetrace.attention.memory import variant_bytes
from shapetrace.errors import UsageError

VALID = [
    (impl, kw)
    for impl in ("manual", "einops", "fused-qkv", "torch", "sdpa")
    for kw in ({}, {"causal": True}, {"mask": "padding", "pad": (1, 3)}, {"kv_len": 9},
               {"kv_heads": 2}, {"kv_heads": 1, "causal": True})
    if not (impl == "fused-qkv" and ("kv_len" in kw or "kv_heads" in kw))
    and not (impl == "torch" and "kv_heads" in kw)
]


def events(run, op):
    return [e for e in run.trace.events if e.op == op]


def errors(run):
    return [d for d in run.trace.diagnostics if d.severity in ("error", "warning")]


# -- validation ---------------------------------------------------------------

@pytest.mark.parametrize("kw, words", [
    ({"kv_heads": 3}, "--kv-heads 3 must divide --heads 8"),
    ({"kv_heads": 16}, "--kv-heads 16 must divide"),
    ({"mask": "padding", "pad": (0, 1, 2)}, "--pad gives 3 value(s) but --batch is 2"),
    ({"mask": "padding", "pad": (0, 6)}, "--pad value 6 must be between 0 and 5"),
    ({"pad": (0, 1)}, "--pad needs --mask padding"),
    ({"causal": True, "kv_len": 5}, "--causal needs self-attention"),
    ({"impl": "fused-qkv", "kv_len": 5}, "--impl fused-qkv projects q, k and v from one input"),
    ({"impl": "torch", "kv_heads": 2}, "no grouped-query attention"),
    ({"impl": "flash"}, "--impl 'flash' is not one of"),
    ({"mask": "diagonal"}, "--mask 'diagonal' is not one of"),
    ({"dropout": 1.5}, "--dropout must be a probability"),
    ({"kv_len": 0}, "--kv-len must be a whole number"),
    ({"broken": "nope"}, "--break 'nope' is not in the catalogue"),
    ({"broken": "skip-transpose", "impl": "sdpa"}, "--break variants are small changes"),
])
def test_bad_options_raise_one_clear_usage_error(kw, words):
    with pytest.raises(UsageError) as err:
        C(**kw)
    assert words in str(err.value)


def test_default_pad_and_dims():
    c = C(mask="padding")
    assert c.pad == (0, 2)
    assert C(kv_len=20).dims == {"B": 2, "T_q": 6, "T_k": 20, "D": 512, "H": 8, "d_k": 64}
    assert C(kv_heads=2).dims["H_kv"] == 2 and "H_kv" not in C(kv_heads=8).dims
    assert C(kv_heads=2).param_count == 2 * 512 * 512 + 2 * 512 * 128 + 2 * 512 + 2 * 128
    assert C().param_count == 4 * 512 * 512 + 4 * 512


# -- every implementation computes the reference's output ----------------------

@pytest.mark.parametrize("impl, kw", VALID, ids=[f"{i}-{'-'.join(map(str, k)) or 'plain'}" for i, k in VALID])
def test_each_impl_matches_the_reference(impl, kw):
    c = C(d_model=64, heads=4, seq_len=5, impl=impl, **kw)
    ref, inp = variants.build_reference(c)
    model = variants.build_impl(c, impl, ref)
    with torch.no_grad():
        want = ref(inp["x"], inp["memory"], inp["pad"])
        got = model(inp["x"], inp["memory"], inp["pad"])
    assert got.shape == want.shape == (2, 5, 64)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_configurable_reference_equals_plain_reference():
    from shapetrace.attention import reference as attention

    plain, x = attention.build(C())
    ref, inp = variants.build_reference(C())
    assert torch.equal(x, inp["x"])
    with torch.no_grad():
        assert torch.equal(plain(x), ref(x))


def test_each_impl_traces_without_diagnostics():
    for impl, kw in VALID:
        run = trace_variant(C(d_model=64, heads=4, seq_len=5, impl=impl, **kw))
        assert run.trace.exception is None, (impl, kw)
        assert errors(run) == [], (impl, kw, run.trace.diagnostics)


# -- cross-attention --------------------------------------------------------------

@pytest.mark.parametrize("B, T_q, T_k, D, H", [(2, 12, 20, 256, 8), (1, 6, 6, 64, 4), (3, 4, 7, 96, 4)])
def test_cross_attention_keeps_query_and_key_tokens_apart(B, T_q, T_k, D, H):
    run = trace_variant(C(batch=B, seq_len=T_q, kv_len=T_k, d_model=D, heads=H))
    soft = events(run, "softmax")[0]
    assert soft.output.shape == (B, H, T_q, T_k)
    assert soft.output.dims == ("B", "H", "T_q", "T_k")
    assert [a.role for a in soft.output.axes][2:] == ["query", "key"]
    lin = events(run, "linear")
    assert [e.output.dims for e in lin] == [("B", "T_q", "D"), ("B", "T_k", "D"), ("B", "T_k", "D"), ("B", "T_q", "D")]
    assert run.trace.result.shape == (B, T_q, D)
    assert errors(run) == []


def test_cross_attention_padding_masks_keys():
    run = trace_variant(C(seq_len=4, kv_len=7, mask="padding", pad=(0, 3), d_model=64, heads=4))
    get = events(run, "__getitem__")[0]
    assert get.output.shape == (2, 1, 1, 7) and get.output.dims == ("B", None, None, "T_k")
    w = run.heat["weights"]
    assert run.heat["batch"] == 1 and all(row[4:] == [0.0, 0.0, 0.0] for row in w)


# -- grouped-query attention ------------------------------------------------------

@pytest.mark.parametrize("D, H, H_kv, T", [(512, 8, 2, 6), (512, 8, 1, 6), (64, 4, 2, 4), (96, 6, 3, 6)])
def test_gqa_shapes_names_and_stride_zero(D, H, H_kv, T):
    d_k, n_rep = D // H, H // H_kv
    run = trace_variant(C(d_model=D, heads=H, kv_heads=H_kv, seq_len=T))
    k_lin = events(run, "linear")[1]
    assert k_lin.output.shape == (2, T, H_kv * d_k)
    assert k_lin.output.dims == ("B", "T", "D_kv" if H_kv > 1 else "d_k")
    ex = events(run, "expand")[0]
    assert ex.output.shape == (2, H_kv, n_rep, T, d_k)
    rep = "n_rep" if H_kv > 1 else "H"  # multi-query: the one kv head is repeated H times
    assert ex.output.dims == ("B", "H_kv" if H_kv > 1 else None, rep, "T", "d_k")
    assert ex.output.stride[2] == 0 and ex.view
    rs = events(run, "reshape")[0]
    assert rs.output.shape == (2, H, T, d_k) and rs.output.dims == ("B", "H", "T", "d_k")
    if H_kv > 1:  # merging H_kv and n_rep: no strides can express it, torch copies
        assert rs.copy_bytes == rs.output.nbytes == 2 * H * T * d_k * 4 and not rs.view
    else:  # one kv head: the stride-0 axis just becomes H, still a view
        assert rs.view and rs.copy_bytes == 0 and rs.output.stride[1] == 0
    assert errors(run) == []
    note = next(n for n in run.notes if n.startswith("grouped-query"))
    saved = 2 * (D * D + D) - 2 * (D * H_kv * d_k + H_kv * d_k)
    assert f"{saved:,} fewer parameters" in note and f"expand #{ex.index}" in note


# -- masks, heat map, NaN rows ----------------------------------------------------

def test_causal_mask_broadcast_and_heat_map():
    run = trace_variant(C(causal=True))
    fill = events(run, "masked_fill")[0]
    assert fill.inputs[1].shape == (6, 6) and fill.inputs[1].dims == ("T", "T")
    assert fill.output.shape == (2, 8, 6, 6)
    scores, weights = run.heat["scores"], run.heat["weights"]
    for i in range(6):
        for j in range(6):
            assert math.isinf(scores[i][j]) == (j > i)
            assert (weights[i][j] == 0.0) == (j > i)
    text = render(run_view(run), width=80)
    assert "scores after masking" in text and "··" in text
    assert "repeated along B, H" in text


def run_view(run):
    from rich.console import Group

    from shapetrace.render.heatmap import HeatMap
    from shapetrace.render.table import TraceView

    return Group(TraceView(run.report(), header=run.header["lines"]), HeatMap(run.heat))


def test_padding_mask_is_key_mask_broadcast_over_heads_and_queries():
    run = trace_variant(C(mask="padding", pad=(0, 2)))
    get = events(run, "__getitem__")[0]
    assert get.inputs[0].shape == (2, 6) and get.inputs[0].dims == ("B", "T")
    assert get.output.shape == (2, 1, 1, 6) and get.output.dims == ("B", None, None, "T")
    assert run.heat["batch"] == 1
    assert all(math.isinf(row[4]) and math.isinf(row[5]) for row in run.heat["scores"])
    assert errors(run) == []


def test_fully_masked_rows_are_nan_rows_and_safe_softmax_fixes_them():
    c = dict(causal=True, mask="padding", pad=(0, 2), pad_side="left")
    run = trace_variant(C(**c))
    nan = [d for d in run.trace.diagnostics if d.kind == "nan-rows"]
    assert len(nan) == 1 and nan[0].severity == "error"
    assert "sequence 1: queries 0, 1" in nan[0].message and "0 / 0" in nan[0].message
    assert sorted({(b, q) for b, _h, q in run.trace.nan_rows}) == [(1, 0), (1, 1)]
    assert len(run.trace.nan_rows) == 2 * 8
    assert nan[0].event == events(run, "softmax")[0].index
    safe = trace_variant(C(safe_softmax=True, **c))
    assert safe.trace.nan_rows == [] and errors(safe) == []
    assert not torch.isnan(safe.trace.result).any()
    assert any(n.startswith("safe softmax") for n in safe.notes)


def test_sdpa_returns_zeros_not_nan_for_fully_masked_rows():
    run = trace_variant(C(impl="sdpa", causal=True, mask="padding", pad=(0, 2), pad_side="left"))
    assert run.trace.nan_rows == [] and not torch.isnan(run.trace.result).any()


def test_torch_impl_nan_rows_detected_from_its_weights():
    run = trace_variant(C(impl="torch", causal=True, mask="padding", pad=(0, 2), pad_side="left"))
    assert [d.kind for d in run.trace.diagnostics] == ["nan-rows"]
    assert sorted({(b, q) for b, _h, q in run.trace.nan_rows}) == [(1, 0), (1, 1)]
    assert torch.isnan(run.trace.result[1, :2]).all() and not torch.isnan(run.trace.result[1, 2:]).any()


def test_heat_map_is_cropped_for_long_sequences():
    run = trace_variant(C(seq_len=20, d_model=64, heads=4, causal=True))
    assert run.heat["shape"] == (20, 20) and run.heat["crop"] == (16, 16)
    assert len(run.heat["weights"]) == 16 and len(run.heat["weights"][0]) == 16
    from shapetrace.render.heatmap import HeatMap

    text = render(HeatMap(run.heat), width=80)
    assert "first 16×16 shown" in " ".join(text.split()) and max(len(line) for line in text.splitlines()) <= 80


def test_nan_demo_heat_map_golden():
    from conftest import assert_golden

    from shapetrace.render.heatmap import HeatMap

    run = trace_variant(C(causal=True, mask="padding", pad=(0, 2), pad_side="left"))
    assert_golden("heatmap_nan_rows_80.txt", render(HeatMap(run.heat), width=80))


def test_sdpa_layout_note_matches_the_events():
    run = trace_variant(C(impl="sdpa"))
    sd = next(e for e in run.trace.events if e.op == "scaled_dot_product_attention")
    c = next(e for e in run.trace.events if e.op == "contiguous")
    note = next(n for n in run.notes if n.startswith("F.scaled_dot_product_attention"))
    assert ("copies nothing" in note) == (c.noop and not sd.output.contiguous)


# -- torch's MultiheadAttention, sdpa, dropout ----------------------------------------

def test_torch_impl_is_opened_up_and_reports_weights():
    run = trace_variant(C(impl="torch"))
    assert not events(run, "multi_head_attention_forward") and len(events(run, "bmm")) == 2
    scores = events(run, "bmm")[0]
    assert (scores.output.shape, scores.output.dims) == ((16, 6, 6), ("B*H", "T", "T"))
    note = next(n for n in run.notes if n.startswith("nn.MultiheadAttention"))
    assert "[2, 8, 6, 6]" in note and "head average [2, 6, 6]" in note and "fast path" in note


def test_sdpa_is_one_fused_op_with_the_mask_going_in():
    run = trace_variant(C(impl="sdpa", causal=True))
    sd = events(run, "scaled_dot_product_attention")
    assert len(sd) == 1 and not events(run, "softmax")
    assert [t.shape for t in sd[0].inputs] == [(2, 8, 6, 64)] * 3 + [(6, 6)]
    assert sd[0].output.dims == ("B", "H", "T", "d_k")
    assert run.heat is None


def test_dropout_sits_on_the_weights_and_keeps_shapes():
    run = trace_variant(C(dropout=0.5, train=True, seed=1))
    ops = [e.op for e in run.trace.events]
    i = ops.index("dropout")
    assert ops[i - 1] == "softmax" and ops[i + 1] == "matmul"
    d = run.trace.events[i]
    assert d.inputs[0].shape == d.output.shape == (2, 8, 6, 6) and d.output.dims == ("B", "H", "T", "T")
    assert any("attention dropout sits at #" in n for n in run.notes)
    evaluation = trace_variant(C(dropout=0.5))
    ref = trace_variant(C())
    assert torch.equal(evaluation.trace.result, ref.trace.result)


# -- presets and the meta device ----------------------------------------------------

def test_presets_document_real_sizes():
    from shapetrace.attention.presets import PRESETS

    expect = {"gpt2": (768, 12, None, 64), "bert-base": (768, 12, None, 64), "bert-large": (1024, 16, None, 64),
              "llama2-7b": (4096, 32, None, 128), "llama3-8b": (4096, 32, 8, 128),
              "llama3-70b": (8192, 64, 8, 128), "mistral-7b": (4096, 32, 8, 128)}
    for name, (D, H, H_kv, d_k) in expect.items():
        p = PRESETS[name]
        assert (p.d_model, p.heads, p.kv_heads) == (D, H, H_kv)
        assert C(d_model=D, heads=H, kv_heads=H_kv).d_k == d_k
    source = (ROOT / "shapetrace" / "attention" / "presets.py").read_text()
    assert source.count("config.json:") >= len(PRESETS)


def test_pick_device_switches_a_variant_to_meta_beyond_the_budget():
    assert pick_device("auto", variant_bytes(C()), 256 << 20) == ("cpu", None)
    big = C(d_model=8192, heads=64, kv_heads=8)
    device, note = pick_device("auto", variant_bytes(big), 256 << 20)
    assert device == "meta" and "meta device" in note and "--max-memory 256 MiB" in note
    assert pick_device("auto", variant_bytes(big), budget_or_default(None))[0] == "meta"   # over the default 1 GiB too
    assert pick_device("meta", variant_bytes(C()), budget_or_default(None))[0] == "meta"   # --device meta
    assert variant_bytes(big) > 2 * 4 * 8192 * 8192
    assert pick_device("auto", variant_bytes(C()), 1000)[0] == "meta"


def test_meta_run_has_shapes_and_skips_value_checks():
    run = trace_variant(C(d_model=256, heads=4, kv_heads=2, causal=True), max_bytes=1000)
    assert run.device == "meta"
    assert events(run, "reshape")[0].output.shape == (2, 4, 6, 64)
    assert run.heat is None and run.trace.nan_rows is None
    kinds = [(d.severity, d.kind) for d in run.trace.diagnostics]
    # the causal mask has no values on the meta device: which keys it hides was not checked either
    assert kinds == [("note", "nan-rows-skipped"), ("note", "direction-unchecked")]
    assert run.trace.report().verdict.mark == "?"
    assert run.notes[0].startswith("real tensors would take about 1.6 MiB, more than --max-memory")
    assert run.notes[0].endswith(". Checks that need values (NaN rows, heat map, outputs) are skipped.")


def test_preset_cli_uses_preset_sizes(cli):
    res = cli("run", "--preset", "gpt2", "--width", "100")
    assert res.exit_code == 0, res.output
    assert "B=2 T=6 D=768 H=12" in res.output and "[B=2, T=6, H=12, d_k=64]" in res.output
    assert "openai-community/gpt2 config.json" in res.output


def test_preset_cli_big_model_goes_meta(cli):
    res = cli("run", "--preset", "llama3-70b", "--width", "100")
    assert res.exit_code == 0, res.output
    assert "device: meta" in res.output and "[B=2, H=64, T=6, d_k=128]" in res.output
    assert "n_rep=8" in res.output


# -- CLI ------------------------------------------------------------------------------

def test_cli_bad_option_is_one_line_exit_2():
    res = subprocess.run([sys.executable, "-m", "shapetrace", "run", "--kv-heads", "3"], capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT), "COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 2
    assert "--kv-heads 3 must divide --heads 8" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("width", [80, 100])
def test_cli_nan_demo_renders_at_width(cli, width):
    res = cli("run", "--causal", "--mask", "padding", "--pad", "0,2", "--pad-side", "left", "--width", str(width))
    assert res.exit_code == 1
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "✗ error nan-rows" in res.output and "!!" in res.output


def test_cli_plain_run_is_unchanged_path(cli):
    res = cli("run", "--width", "100")
    assert res.exit_code == 0 and "multi-head self-attention · B=2 T=6 D=512 H=8" in res.output


def test_cli_modules_do_not_import_torch():
    code = ("import sys; import shapetrace.cli.app, shapetrace.cli.variants, shapetrace.cli.compare, "
            "shapetrace.attention.catalogue, shapetrace.attention.presets; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False", out.stderr


def test_cli_json_has_trace_and_variant_facts(cli):
    import json

    res = cli("run", "--json", "--causal", "--mask", "padding", "--pad", "0,2", "--pad-side", "left")
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["version"] == 2 and data["variant"]["device"] == "cpu"
    assert data["variant"]["config"]["pad"] == [0, 2]
    assert sorted({(b, q) for b, _h, q in data["variant"]["nan_rows"]}) == [(1, 0), (1, 1)]
    assert [d["kind"] for d in data["diagnostics"]] == ["nan-rows"]


def test_variant_runs_honour_the_classroom_options(cli, tmp_path):
    res = cli("run", "--causal", "--compact", "--explain", "brief", "--width", "80")
    assert res.exit_code == 0, res.output
    assert "strides" not in res.output.splitlines()[4]  # --compact drops the strides column
    assert "scores after masking" in res.output
    out = tmp_path / "gqa.svg"
    res = cli("run", "--kv-heads", "2", "--export", str(out))
    assert res.exit_code == 0 and out.read_text().startswith("<svg")


def test_variant_run_draws_the_stride_zero_layout(cli):
    res = cli("run", "--kv-heads", "2", "--diagram", "10", "--width", "100")
    assert res.exit_code == 0, res.output
    assert "n_rep=4 · stride 0" in res.output and "expand repeats without copying" in res.output


def test_heat_map_title_does_not_claim_masking_when_nothing_is_masked(cli):
    """--kv-len 20 masks nothing: the panel is not titled "scores after masking" (issue 23, item 7)."""
    res = cli("run", "--kv-len", "20", "--width", "100")
    assert "scores (no mask in this run)" in res.output
    assert "scores after masking" not in res.output
    assert "scores after masking" in cli("run", "--causal", "--width", "100").output
