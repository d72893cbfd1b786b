"""Any size: a llama3-70b-sized model of our own (tests/scripts/llama_meta.py, torch only: 80 layers,
hidden 8192, 64 heads, 8 kv heads, intermediate 28672, vocab 128256, RoPE, GQA) built on the meta
device and traced from token ids with ``shapetrace trace``: every attention tensor named, module paths
on every event, the 79 repeated layers folded exactly."""

from __future__ import annotations

import pytest
from conftest import ROOT

from shapetrace.app.layers import check_layer, fold_layers, module_summary
from shapetrace.errors import UsageError

SCRIPT = str(ROOT / "tests" / "scripts" / "llama_meta.py")
DIMS = "B=1,T=16,D=8192,H=64,H_kv=8"
LAYERS = 80
LAYER_OPS = 37  # per layer: 2 mean, 7 linear, 3 views + 3 transposes, RoPE 2 unsqueeze + 2x(2 slices, cat),
#                 2x repeat_kv (slice, expand, reshape), kᵀ, 2 matmul, mask add, softmax, merge (3 ops)
#: Layer 0's attention ops and the names of their outputs ("?" where an axis has no name).
ATTENTION = [
    ("view", "B T H d_k"), ("transpose", "B H T d_k"),            # q split into heads
    ("view", "B T H_kv d_k"), ("transpose", "B H_kv T d_k"),      # k: 8 kv heads
    ("view", "B T H_kv d_k"), ("transpose", "B H_kv T d_k"),      # v
    ("__getitem__", "B H T d_k[0:64]"), ("__getitem__", "B H T d_k[64:128]"), ("cat", "B H T d_k"),  # rotate_half(q)
    ("__getitem__", "B H_kv T d_k[0:64]"), ("__getitem__", "B H_kv T d_k[64:128]"), ("cat", "B H_kv T d_k"),
    ("__getitem__", "B H_kv ? T d_k"), ("expand", "B H_kv n_rep T d_k"), ("reshape", "B H T d_k"),  # repeat_kv(k)
    ("__getitem__", "B H_kv ? T d_k"), ("expand", "B H_kv n_rep T d_k"), ("reshape", "B H T d_k"),  # repeat_kv(v)
    ("transpose", "B H d_k T"), ("matmul", "B H T T"), ("add", "B H T T"), ("softmax", "B H T T"),
    ("matmul", "B H T d_k"), ("transpose", "B T H d_k"), ("contiguous", "B T H d_k"), ("reshape", "B T D"),
]


@pytest.fixture(scope="module")
def events():
    from shapetrace.app.script import run_script
    from shapetrace.engine.dims import parse_dims

    run = run_script(SCRIPT, [], parse_dims(DIMS))
    assert run.exception is None
    return run.trace.events


@pytest.fixture(scope="module")
def table():
    from typer.testing import CliRunner

    from shapetrace.cli.app import app

    result = CliRunner().invoke(app, ["trace", SCRIPT, "--dims", DIMS, "--width", "120"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _dims(info) -> str:
    return " ".join(d or "?" for d in info.dims)


def test_every_attention_tensor_of_every_layer_is_named(events):
    assert len(events) == 9 + LAYERS * LAYER_OPS + 2
    for n in range(LAYERS):
        attn = [e for e in events if e.module == f"model.layers.{n}.self_attn" and e.op != "unsqueeze"]
        assert [(e.op, _dims(e.output)) for e in attn] == ATTENTION, n
    projections = [(e.module.rsplit(".", 1)[-1], _dims(e.output)) for e in events[:60]
                   if e.module.startswith("model.layers.0.self_attn.")]
    assert projections == [("q_proj", "B T D"), ("k_proj", "B T D_kv"), ("v_proj", "B T D_kv"),
                           ("o_proj", "B T D")]
    assert _dims(events[0].output) == "B T D" and events[0].module == "model.embed_tokens"
    assert {t.device for e in events for t in (*e.inputs, *e.outputs)} == {"meta"}


def test_every_event_has_its_module_path(events):
    inner = {"input_layernorm", "post_attention_layernorm", "self_attn", "self_attn.q_proj", "self_attn.k_proj",
             "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}
    assert {e.module for e in events} == {"model.embed_tokens", "model", "model.rotary_emb", "model.norm", "lm_head",
                                          *(f"model.layers.{n}.{m}" for n in range(LAYERS) for m in inner)}
    assert [e.module for e in events[-2:]] == ["model.norm", "lm_head"]
    assert events[-1].output.shape == (1, 16, 128256)


def test_seventy_nine_layers_fold_exactly_into_layer_0(events, table):
    (fold,) = fold_layers(events)
    assert [layer.number for layer in fold.layers] == list(range(1, LAYERS))
    assert fold.original.path == "model.layers.0" and len(fold.original.events) == LAYER_OPS
    assert "\n46-2968 model.layers.1-79: the same 37 ops as model.layers.0\n" in table
    assert table.count("the same 37 ops") == 1
    assert "2971 ops · 1525 views · 402 copies (82.5 MiB) · 1044 computed buffers (242 MiB)" in table
    rows = [(r.path, r.ops, r.views, r.copies, r.each) for r in module_summary(events)]
    assert rows == [("model", 10, 5, 2, False), ("model.layers.0-79", 37, 19, 5, True), ("lm_head", 1, 0, 0, False)]
    assert "\nmodel.layers.0-79 (each)   37     19  5 (1.0 MiB)   3.0 MiB\n" in table


def test_layer_80_does_not_exist(events):
    with pytest.raises(UsageError) as info:
        check_layer(events, 80)
    assert str(info.value) == "--layer 80: this model has layers 0-79"


def test_docs_excerpt_comes_from_a_real_run(table):
    """The 80-layer table pasted in docs/whole-models.md (moved there from the README) is today's output."""
    live = {line.rstrip() for line in table.splitlines()}
    readme = (ROOT / "docs" / "whole-models.md").read_text()
    block = readme.split("tests/scripts/llama_meta.py --dims B=1,T=16,D=8192,H=64,H_kv=8` at 120 columns")[1]
    pasted = [line.rstrip() for line in block.split("```text\n")[1].split("```")[0].splitlines()
              if line.strip() not in ("…", "")]
    assert len(pasted) > 15 and [line for line in pasted if line not in live] == []
