"""huggingface/transformers, src/transformers/models/helium/modeling_helium.py (v4.48, ``HeliumAttention``,
``HeliumRotaryEmbedding``, ``repeat_kv``): kyutai's Helium, a Llama-style decoder: grouped-query attention
(``num_key_value_heads`` < ``num_attention_heads``), ``q``/``k``/``v`` ``view(B, T, -1, d).transpose(1, 2)``,
rotary with ``rotate_half``, ``repeat_kv`` (``expand`` + ``reshape``), a causal additive mask, ``softmax`` in
float32, ``transpose(1, 2).reshape(B, T, -1)`` and ``o_proj``.

Bugs: ``out-reshape-without-transpose``: the context ``(B, H, T, d)`` ``reshape(B, T, -1)``ed without
``transpose(1, 2)`` (the natural slip; heads and tokens mixed); ``repeat-kv-heads-inner``: ``repeat_kv`` written
with ``repeat(1, n_rep, 1, 1)`` (query head ``h`` reads key/value head ``h mod G``, not ``h // n_rep``: the
copies outermost, the order GQA checkpoints do not use; cf. huggingface/transformers #26486-style slips)."""

import math
import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class HeliumRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def repeat_kv(hidden_states, n_rep, bug=""):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    if bug == "repeat-kv-heads-inner":
        return hidden_states.repeat(1, n_rep, 1, 1)
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class HeliumAttention(nn.Module):
    def __init__(self, D, H, G, bug=""):
        super().__init__()
        self.head_dim, self.num_heads, self.num_kv = D // H, H, G
        self.num_key_value_groups, self.bug = H // G, bug
        self.q_proj = nn.Linear(D, H * self.head_dim, bias=False)
        self.k_proj = nn.Linear(D, G * self.head_dim, bias=False)
        self.v_proj = nn.Linear(D, G * self.head_dim, bias=False)
        self.o_proj = nn.Linear(H * self.head_dim, D, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.num_key_value_groups, self.bug)
        v = repeat_kv(v, self.num_key_value_groups, self.bug)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v)
        if self.bug == "out-reshape-without-transpose":
            attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        else:
            attn_output = attn_output.transpose(1, 2).reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


class HeliumModel(nn.Module):
    def __init__(self, vocab, D, H, G, bug=""):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, D)
        self.rotary_emb = HeliumRotaryEmbedding(D // H)
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(D), nn.RMSNorm(D)
        self.self_attn = HeliumAttention(D, H, G, bug)
        self.gate_proj, self.up_proj = nn.Linear(D, 2 * D, bias=False), nn.Linear(D, 2 * D, bias=False)
        self.down_proj, self.norm = nn.Linear(2 * D, D, bias=False), nn.RMSNorm(D)

    def forward(self, input_ids):
        B, T = input_ids.shape
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        causal = torch.full((T, T), torch.finfo(hidden_states.dtype).min).triu(1)[None, None, :, :]
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.input_layernorm(hidden_states), position_embeddings, causal)
        h = self.post_attention_layernorm(hidden_states)
        hidden_states = hidden_states + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))
        return self.norm(hidden_states)


BUGS = ("out-reshape-without-transpose", "repeat-kv-heads-inner")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)
EQUAL = {"B=2 T=6 D=64 H=4 H_kv=2": "B=4 T=4 D=64 H=4 H_kv=2"}


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return HeliumModel(50, D, H, H_kv, bug=bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
