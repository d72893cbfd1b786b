"""Attention sizes of real models (plain data, no torch).

Only the attention shapes are taken (width D, heads H, key/value heads H_kv,
context length); the projections here keep biases even where the real model
has none (LLaMA, Mistral, Falcon: ``bias=False``), and the run's note says so.
Each number's source is in the comment beside it:
the model's published config.json on the Hugging Face Hub, or its paper.
"""

from __future__ import annotations

from dataclasses import dataclass

from shapetrace.errors import UsageError


@dataclass(frozen=True)
class Preset:
    name: str
    d_model: int
    heads: int
    kv_heads: int | None
    context: int
    source: str
    #: whether the real model's q/k/v/output projections have biases (config.json: attention_bias,
    #: bias; LLaMA, Mistral and Falcon have none). The model shapetrace builds always has them.
    bias: bool = True

    def describe(self) -> str:
        kv = f", {self.kv_heads} kv-heads" if self.kv_heads else ""
        return f"{self.name}: D={self.d_model}, H={self.heads}{kv}, context {self.context:,}"


PRESETS: dict[str, Preset] = {p.name: p for p in [
    # openai-community/gpt2 config.json: n_embd 768, n_head 12, n_positions 1024
    Preset("gpt2", 768, 12, None, 1024, "openai-community/gpt2 config.json"),
    # openai-community/gpt2-xl config.json: n_embd 1600, n_head 25, n_positions 1024
    Preset("gpt2-xl", 1600, 25, None, 1024, "openai-community/gpt2-xl config.json"),
    # google-bert/bert-base-uncased config.json: hidden_size 768, num_attention_heads 12, max_position_embeddings 512
    Preset("bert-base", 768, 12, None, 512, "google-bert/bert-base-uncased config.json"),
    # google-bert/bert-large-uncased config.json: hidden_size 1024, num_attention_heads 16, max_position_embeddings 512
    Preset("bert-large", 1024, 16, None, 512, "google-bert/bert-large-uncased config.json"),
    # meta-llama/Llama-2-7b-hf config.json: hidden_size 4096, num_attention_heads 32,
    # num_key_value_heads 32, max_position_embeddings 4096
    Preset("llama2-7b", 4096, 32, None, 4096, "meta-llama/Llama-2-7b-hf config.json", bias=False),
    # meta-llama/Llama-2-70b-hf config.json: hidden_size 8192, num_attention_heads 64,
    # num_key_value_heads 8, max_position_embeddings 4096
    Preset("llama2-70b", 8192, 64, 8, 4096, "meta-llama/Llama-2-70b-hf config.json", bias=False),
    # meta-llama/Meta-Llama-3-8B config.json: hidden_size 4096, num_attention_heads 32,
    # num_key_value_heads 8, max_position_embeddings 8192
    Preset("llama3-8b", 4096, 32, 8, 8192, "meta-llama/Meta-Llama-3-8B config.json", bias=False),
    # meta-llama/Meta-Llama-3-70B config.json: hidden_size 8192, num_attention_heads 64,
    # num_key_value_heads 8, max_position_embeddings 8192
    Preset("llama3-70b", 8192, 64, 8, 8192, "meta-llama/Meta-Llama-3-70B config.json", bias=False),
    # mistralai/Mistral-7B-v0.1 config.json: hidden_size 4096, num_attention_heads 32,
    # num_key_value_heads 8, max_position_embeddings 32768 (sliding_window 4096)
    Preset("mistral-7b", 4096, 32, 8, 32768, "mistralai/Mistral-7B-v0.1 config.json", bias=False),
    # tiiuae/falcon-7b config.json: hidden_size 4544, n_head 71, multi_query true (one kv head)
    Preset("falcon-7b", 4544, 71, 1, 2048, "tiiuae/falcon-7b config.json", bias=False),
]}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"--preset {name!r} is not known; choose one of: {', '.join(PRESETS)}") from None


def help_text() -> str:
    """The --preset help: every preset with its sizes."""
    return "Real model sizes: " + "; ".join(p.describe() for p in PRESETS.values()) + "."
