"""A Llama-style decoder written with torch alone, built on the meta device at llama3-70b sizes.

Written the way public Llama code is (Meta's llama and transformers' modeling_llama): RMSNorm,
rotary position embeddings (rotate_half), grouped-query attention with q_proj/k_proj/v_proj/o_proj
and repeat_kv, a SwiGLU MLP (gate_proj, up_proj, down_proj), pre-norm residual blocks. The default
sizes are llama3-70b's (80 layers, hidden 8192, 64 heads, 8 kv heads, intermediate 28672, vocab
128256): on meta nothing is allocated, so the whole forward runs with shapes and strides only.
Used by tests/app/test_llama_meta.py and benchmarks/bench_llama70b_meta.py.
"""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)                       # (B, T, 1)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)  # (B, T, D)
        return self.weight * hidden_states                                           # (B, T, D)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, base: float = 500000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)                # (d_k/2,)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)  # (B, d_k/2, 1)
        position_ids_expanded = position_ids[:, None, :].float()                     # (B, 1, T)
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)          # (B, T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                      # (B, T, d_k)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)                          # (B, T, d_k) each


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]                                                  # (B, H, T, d_k/2)
    x2 = x[..., x.shape[-1] // 2:]                                                   # (B, H, T, d_k/2)
    return torch.cat((-x2, x1), dim=-1)                                              # (B, H, T, d_k)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos.unsqueeze(1)                                                           # (B, 1, T, d_k)
    sin = sin.unsqueeze(1)                                                           # (B, 1, T, d_k)
    q_embed = (q * cos) + (rotate_half(q) * sin)                                     # (B, H, T, d_k)
    k_embed = (k * cos) + (rotate_half(k) * sin)                                     # (B, H_kv, T, d_k)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep: int):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)  # (B, H, T, d_k)


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, num_key_value_heads: int):
        super().__init__()
        self.num_heads, self.num_key_value_heads = num_heads, num_key_value_heads
        self.head_dim = hidden_size // num_heads
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, hidden_states, cos, sin, causal_mask):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)                                    # (B, T, H*d_k)
        key_states = self.k_proj(hidden_states)                                      # (B, T, H_kv*d_k)
        value_states = self.v_proj(hidden_states)                                    # (B, T, H_kv*d_k)
        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, d_k)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)  # (B, H_kv, T, d_k)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)  # (B, H_kv, T, d_k)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states = repeat_kv(key_states, self.num_key_value_groups)                # (B, H, T, d_k)
        value_states = repeat_kv(value_states, self.num_key_value_groups)            # (B, H, T, d_k)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)  # (B, H, T, T)
        attn_weights = attn_weights + causal_mask                                    # (B, H, T, T)
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)  # (B, H, T, T)
        attn_output = torch.matmul(attn_weights, value_states)                       # (B, H, T, d_k)
        attn_output = attn_output.transpose(1, 2).contiguous()                       # (B, T, H, d_k)
        attn_output = attn_output.reshape(bsz, q_len, -1)                            # (B, T, D)
        return self.o_proj(attn_output)                                              # (B, T, D)


class LlamaMLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))           # (B, T, D)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, num_key_value_heads: int, intermediate_size: int):
        super().__init__()
        self.self_attn = LlamaAttention(hidden_size, num_heads, num_key_value_heads)
        self.mlp = LlamaMLP(hidden_size, intermediate_size)
        self.input_layernorm = LlamaRMSNorm(hidden_size)
        self.post_attention_layernorm = LlamaRMSNorm(hidden_size)

    def forward(self, hidden_states, cos, sin, causal_mask):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)                          # (B, T, D)
        hidden_states = self.self_attn(hidden_states, cos, sin, causal_mask)         # (B, T, D)
        hidden_states = residual + hidden_states                                     # (B, T, D)
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)                 # (B, T, D)
        return residual + self.mlp(hidden_states)                                    # (B, T, D)


class LlamaModel(nn.Module):
    def __init__(self, vocab_size, hidden_size, num_layers, num_heads, num_key_value_heads, intermediate_size):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(hidden_size, num_heads, num_key_value_heads, intermediate_size)
            for _ in range(num_layers))
        self.norm = LlamaRMSNorm(hidden_size)
        self.rotary_emb = LlamaRotaryEmbedding(hidden_size // num_heads)

    def forward(self, input_ids):
        bsz, seq_len = input_ids.shape
        hidden_states = self.embed_tokens(input_ids)                                 # (B, T, D)
        position_ids = torch.arange(seq_len, device=input_ids.device)[None, :]       # (1, T)
        cos, sin = self.rotary_emb(hidden_states, position_ids)                      # (1, T, d_k) each
        causal_mask = torch.full((seq_len, seq_len), float("-inf"), device=input_ids.device).triu(1)  # (T, T)
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, cos, sin, causal_mask)      # (B, T, D)
        return self.norm(hidden_states)                                              # (B, T, D)


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab_size=128256, hidden_size=8192, num_layers=80, num_heads=64, num_key_value_heads=8,
                 intermediate_size=28672):
        super().__init__()
        self.model = LlamaModel(vocab_size, hidden_size, num_layers, num_heads, num_key_value_heads,
                                intermediate_size)
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)

    def forward(self, input_ids):
        hidden_states = self.model(input_ids)                                        # (B, T, D)
        return self.lm_head(hidden_states)                                           # (B, T, V)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--intermediate", type=int, default=28672)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--device", default="meta")
    a = parser.parse_args()
    with torch.device(a.device):
        model = LlamaForCausalLM(a.vocab, a.hidden, a.layers, a.heads, a.kv_heads, a.intermediate).to(torch.bfloat16)
        input_ids = torch.zeros(a.batch, a.tokens, dtype=torch.long)                 # (B, T)
    with torch.no_grad():
        logits = model(input_ids)                                                    # (B, T, V)
    print(tuple(logits.shape), logits.device, logits.dtype)


if __name__ == "__main__":
    main()
