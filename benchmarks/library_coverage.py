"""How much of transformers' own attention shapetrace names: per-head tensors named ``[B, H, …]`` over
tokens, per model, eager and SDPA, and any error or warning on this correct code (issue 21).

    pip install transformers && python benchmarks/library_coverage.py

Each model is built from a small config with random weights (nothing is downloaded) and traced from
its real inputs (token ids, or pixels) with ``--dims``-style sizes. A per-head tensor is a 4-d result
of an op in an attention module whose first two sizes are B and H (or H_kv); it counts as named when
those two axes are named ``B`` and ``H``/``H_kv`` and one of the other two is a token axis. A crash
of the reading of the trace is shown as ``crash``.
"""

from __future__ import annotations

import logging
import warnings

import torch

import shapetrace


def per_head(trace, dims: dict) -> tuple[int, int]:
    """(named, all) per-head tensors of the attention modules."""
    heads = {dims["H"], dims.get("H_kv", dims["H"])} - {1}
    found = [o.dims for e in trace.events for o in e.outputs
             if len(o.shape) == 4 and o.shape[0] == dims["B"] and o.shape[1] in heads
             and ("attn" in e.module.lower() or "attention" in e.module.lower())]
    good = [d for d in found if d[0] == "B" and d[1] in ("H", "H_kv")
            and any(x and trace.namer.role(x) == "tokens" for x in d[2:])]
    return len(good), len(found)


def loud(trace) -> set:
    return {(d.severity, d.kind) for d in trace.diagnostics if d.severity in ("error", "warning")}


def cases(tf) -> list:
    """(name, model maker, input, dims) per model: small configs, random weights."""
    S = {"B": 2, "T": 6, "D": 64, "H": 4}
    GQA = {**S, "H_kv": 2}
    PIXELS = {"B": 2, "D": 64, "H": 4}
    ids, px = torch.randint(0, 101, (2, 6)), torch.randn(2, 3, 32, 32)
    c = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128, vocab_size=101,
             max_position_embeddings=32)
    vision = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128, image_size=32,
                  patch_size=8)
    deepseek = dict(c, num_key_value_heads=4, moe_intermediate_size=32, kv_lora_rank=16, q_lora_rank=24,
                    qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=8, n_routed_experts=2, num_experts_per_tok=1,
                    first_k_dense_replace=1, n_group=1, topk_group=1)
    return [
        ("GPT-2", lambda: tf.GPT2Model(tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=32,
                                                     vocab_size=101)), ids, S),
        ("Llama (GQA)", lambda: tf.LlamaModel(tf.LlamaConfig(**c, num_key_value_heads=2)), ids, GQA),
        ("Mistral (GQA)", lambda: tf.MistralModel(tf.MistralConfig(**c, num_key_value_heads=2)), ids, GQA),
        ("Qwen3 (GQA)", lambda: tf.Qwen3Model(tf.Qwen3Config(**c, num_key_value_heads=2, head_dim=16)), ids, GQA),
        ("Gemma (GQA)", lambda: tf.GemmaModel(tf.GemmaConfig(**c, num_key_value_heads=2, head_dim=16)), ids, GQA),
        ("Phi-3 (fused GQA)", lambda: tf.Phi3Model(tf.Phi3Config(**c, num_key_value_heads=2, pad_token_id=0)),
         ids, GQA),
        ("Falcon", lambda: tf.FalconModel(tf.FalconConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                                                          vocab_size=101, new_decoder_architecture=False,
                                                          multi_query=False)), ids, S),
        ("Bloom", lambda: tf.BloomModel(tf.BloomConfig(hidden_size=64, n_head=4, n_layer=2, vocab_size=101)), ids, S),
        ("GPT-NeoX", lambda: tf.GPTNeoXModel(tf.GPTNeoXConfig(**c)), ids, S),
        ("DeepSeek-V3 (MLA)", lambda: tf.DeepseekV3Model(tf.DeepseekV3Config(**deepseek)), ids, S),
        ("BERT", lambda: tf.BertModel(tf.BertConfig(**c)), ids, S),
        ("T5 encoder", lambda: tf.T5EncoderModel(tf.T5Config(d_model=64, num_heads=4, d_kv=16, num_layers=2, d_ff=128,
                                                             vocab_size=101)), ids, S),
        ("ViT (pixels)", lambda: tf.ViTModel(tf.ViTConfig(**vision)), px, PIXELS),
        ("CLIP vision (pixels)", lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig(**vision)), px, PIXELS),
    ]


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import transformers as tf

    tf.logging.set_verbosity_error()
    print(f"transformers {tf.__version__}, torch {torch.__version__}")
    print(f"{'model':22s} {'eager':>9s} {'sdpa':>9s}  errors or warnings")
    for name, make, x, dims in cases(tf):
        cells, noise = [], set()
        for impl in ("eager", "sdpa"):
            torch.manual_seed(0)
            model = make().eval()
            model.config._attn_implementation = impl
            try:
                with torch.no_grad(), shapetrace.trace(dims=dims) as t:
                    model(x)
                named, total = per_head(t, dims)
                cells.append(f"{named}/{total}")
                noise |= loud(t)
            except Exception as exc:   # a crash is a finding: shown, and the next model runs
                cells.append("crash")
                noise.add(("crash", type(exc).__name__))
        print(f"{name:22s} {cells[0]:>9s} {cells[1]:>9s}  {', '.join(k for _, k in sorted(noise)) or 'none'}")


if __name__ == "__main__":
    main()
