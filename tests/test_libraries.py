"""Modules of transformers and timm, built from small configs with random weights (nothing downloaded).

An optional group: it runs where ``transformers`` / ``timm`` are installed
(``pip install transformers timm``) and skips, saying so, where they are not; the core suite stays
torch-only. Each model is traced from its real inputs with ``--dims``-style sizes: attention tensors
named by provenance, no error or warning, no name that contradicts a declared size.
"""

from __future__ import annotations

import pytest
import torch

import shapetrace

SIZES = {"B": 2, "T": 6, "D": 64, "H": 4}


def loud(trace) -> list[tuple[str, str]]:
    return [(d.severity, d.kind) for d in trace.diagnostics if d.severity in ("error", "warning")]


def contradictions(trace, dims: dict) -> list:
    bad = []
    sizes = {**dims, "d_k": dims["D"] // dims["H"]}
    for e in trace.events:
        for info in e.outputs:
            for name, size in zip(info.dims, info.shape):
                if name in sizes and sizes[name] != size:
                    bad.append((e.index, e.op, info.dims, info.shape))
    return bad


def heads_named(trace) -> list[tuple[str | None, ...]]:
    return [e.output.dims for e in trace.events if e.output is not None and len(e.output.dims) == 4
            and e.output.dims[1] in ("H", "H_kv") and e.output.dims[3] == "d_k"]


def traced(model, *inputs, dims=SIZES):
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(*inputs)
    return t


def test_gpt2_from_token_ids():
    transformers = pytest.importorskip("transformers", reason="optional group: pip install transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=32, vocab_size=101)
    model = transformers.GPT2Model(config).eval()
    t = traced(model, torch.randint(0, 101, (2, 6)))
    assert loud(t) == [] and contradictions(t, SIZES) == []
    embedding = next(e for e in t.events if e.op == "embedding")
    assert embedding.module == "wte" and embedding.output.dims == ("B", "T", "D")
    named = heads_named(t)
    assert len(named) >= 6 and set(named) == {("B", "H", "T", "d_k")}   # q, k, v in both layers
    assert any(e.module.startswith("h.1.attn") for e in t.events)


def test_llama_gqa_with_rope():
    transformers = pytest.importorskip("transformers", reason="optional group: pip install transformers")
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                      num_hidden_layers=2, intermediate_size=128, vocab_size=101,
                                      max_position_embeddings=32)
    model = transformers.LlamaModel(config).eval()
    dims = {**SIZES, "H_kv": 2}
    t = traced(model, torch.randint(0, 101, (2, 6)), dims=dims)
    assert loud(t) == [] and contradictions(t, dims) == []
    named = set(heads_named(t))
    assert ("B", "H", "T", "d_k") in named and ("B", "H_kv", "T", "d_k") in named
    assert any(e.module.endswith("self_attn.k_proj") for e in t.events)


def test_bert_encoder():
    transformers = pytest.importorskip("transformers", reason="optional group: pip install transformers")
    config = transformers.BertConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                                     intermediate_size=128, vocab_size=101, max_position_embeddings=32)
    model = transformers.BertModel(config).eval()
    t = traced(model, torch.randint(0, 101, (2, 6)))
    assert loud(t) == [] and contradictions(t, SIZES) == []
    assert ("B", "H", "T", "d_k") in set(heads_named(t))


def test_timm_vit_has_no_false_alarm():
    timm = pytest.importorskip("timm", reason="optional group: pip install timm (and a torchvision built for "
                                                  "this torch)")
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, num_classes=10).eval()
    dims = {"B": 2, "T": 5, "D": 192, "H": 3}
    t = traced(model, torch.randn(2, 3, 32, 32), dims=dims)
    assert loud(t) == [] and contradictions(t, dims) == []
