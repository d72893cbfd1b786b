"""OpenBMB/MiniCPM via huggingface/transformers, src/transformers/models/minicpm/... as in the hub's
``modeling_minicpm.py`` (MiniCPM-2B, ``MiniCPMAttention``, ``MiniCPMDecoderLayer``, ``MiniCPMModel``): a
Llama-style decoder with µP-style scalings: the embeddings times ``scale_emb``, each residual branch times
``scale_depth / sqrt(num_hidden_layers)``, the last states divided by ``hidden_size / dim_model_base`` before a
tied ``lm_head``; attention: ``view(B, T, H, d).transpose(1, 2)``, rotary (``rotate_half``, ``cos[position_ids]``),
``matmul`` / ``sqrt(d)`` + a causal mask, ``softmax`` in float32, ``transpose(1, 2).reshape(B, T, D)``.

Bugs: ``softmax-over-queries``: ``softmax(dim=-2)`` (each key's column normalised over queries; the natural slip);
``key-view-heads-first``: the keys ``view(B, H, T, d)``ed straight from
``(B, T, D)`` with no ``transpose(1, 2)`` (the slip of writing the target layout into ``view``; tokens and heads
mixed in the keys only)."""

import math
import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class MiniCPMRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=32, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_position_embeddings).float()
        emb = torch.cat((torch.outer(t, inv_freq), torch.outer(t, inv_freq)), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)


class MiniCPMAttention(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.hidden_size, self.bug = H, D // H, D, bug
        self.q_proj, self.k_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        self.v_proj, self.o_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        self.rotary_emb = MiniCPMRotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, attention_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        if self.bug == "key-view-heads-first":
            k = self.k_proj(hidden_states).view(bsz, self.num_heads, q_len, self.head_dim)
        else:
            k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v.to(torch.float32), seq_len=q_len)
        cos, sin = cos[position_ids].unsqueeze(1), sin[position_ids].unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + attention_mask
        dim = -2 if self.bug == "softmax-over-queries" else -1
        attn_weights = nn.functional.softmax(attn_weights, dim=dim, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()
        return self.o_proj(attn_output.reshape(bsz, q_len, self.hidden_size))


class MiniCPMForCausalLM(nn.Module):
    def __init__(self, vocab, D, H, layers=2, scale_emb=12.0, scale_depth=1.4, dim_model_base=16, bug=""):
        super().__init__()
        self.embed_tokens, self.bug = nn.Embedding(vocab, D), bug
        self.scale_emb, self.scale_depth, self.num_layers = scale_emb, scale_depth, layers
        self.width_scale = D / dim_model_base
        self.attn = nn.ModuleList([MiniCPMAttention(D, H, bug) for _ in range(layers)])
        self.ln1 = nn.ModuleList([nn.RMSNorm(D) for _ in range(layers)])
        self.ln2 = nn.ModuleList([nn.RMSNorm(D) for _ in range(layers)])
        self.up = nn.ModuleList([nn.Linear(D, 2 * D, bias=False) for _ in range(layers)])
        self.down = nn.ModuleList([nn.Linear(2 * D, D, bias=False) for _ in range(layers)])
        self.norm = nn.RMSNorm(D)

    def forward(self, input_ids):
        B, T = input_ids.shape
        position_ids = torch.arange(T).unsqueeze(0)
        hidden_states = self.embed_tokens(input_ids) * self.scale_emb
        mask = torch.full((T, T), torch.finfo(hidden_states.dtype).min).triu(1)[None, None]
        branch = self.scale_depth / math.sqrt(self.num_layers)
        for attn, ln1, ln2, up, down in zip(self.attn, self.ln1, self.ln2, self.up, self.down):
            hidden_states = hidden_states + attn(ln1(hidden_states), mask, position_ids) * branch
            hidden_states = hidden_states + down(nn.functional.silu(up(ln2(hidden_states)))) * branch
        hidden_states = self.norm(hidden_states)
        return nn.functional.linear(hidden_states / self.width_scale, self.embed_tokens.weight)


BUGS = ("softmax-over-queries", "key-view-heads-first")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return MiniCPMForCausalLM(50, D, H, bug=bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
