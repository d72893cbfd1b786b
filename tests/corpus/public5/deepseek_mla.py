"""deepseek-ai/DeepSeek-V2, modeling_deepseek.py (``DeepseekV2Attention``, multi-head latent attention):
queries ``q_b_proj(q_a_layernorm(q_a_proj(x)))`` viewed ``(B, T, H, nope + rope)`` and transposed, split
into ``q_nope`` and ``q_pe``; keys and values compressed by ``kv_a_proj_with_mqa`` into a latent plus one
shared rotary part ``k_pe`` (``view(B, T, 1, rope).transpose(1, 2)``: one head for all), the latent
expanded by ``kv_b_proj`` into per-head ``k_nope`` and values; rotary (``rotate_half``) on ``q_pe`` and
``k_pe``; ``query_states``/``key_states`` filled by slices of ``new_empty`` (``key_states[:, :, :,
nope:] = k_pe`` broadcasts the shared head), softmax in float32, ``transpose(1, 2)`` and ``reshape`` to
``H * v_head_dim`` before ``o_proj``.

Bug (argument): ``kv-no-transpose``: ``kv_b_proj(...)`` viewed ``(B, H, T, nope + v)`` directly, without
``view(B, T, H, ...)`` and ``transpose(1, 2)`` (the FuxiCTR #30 class,
https://github.com/xue-pai/FuxiCTR/issues/30, in MLA's per-head expansion)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary(q, k, position_ids, dim, base=10000):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    freqs = position_ids[:, :, None].float() * inv_freq[None, None, :]  # (B, T, rope/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (B, T, rope)
    cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)  # (B, 1, T, rope)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class DeepseekV2Attention(nn.Module):
    def __init__(self, hidden=32, heads=4, q_rank=24, kv_rank=16, nope=8, rope=4, v_dim=8, bug=""):
        super().__init__()
        self.num_heads, self.nope, self.rope, self.v_dim = heads, nope, rope, v_dim
        self.kv_rank, self.bug = kv_rank, bug
        self.q_head_dim = nope + rope
        self.q_a_proj = nn.Linear(hidden, q_rank, bias=False)
        self.q_a_layernorm = nn.RMSNorm(q_rank)
        self.q_b_proj = nn.Linear(q_rank, heads * self.q_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden, kv_rank + rope, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(kv_rank)
        self.kv_b_proj = nn.Linear(kv_rank, heads * (nope + v_dim), bias=False)
        self.o_proj = nn.Linear(heads * v_dim, hidden, bias=False)
        self.softmax_scale = self.q_head_dim ** -0.5

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
        q = q.view(bsz, q_len, self.num_heads, self.q_head_dim).transpose(1, 2)  # (B, H, T, nope+rope)
        q_nope, q_pe = torch.split(q, [self.nope, self.rope], dim=-1)
        compressed_kv = self.kv_a_proj_with_mqa(hidden_states)  # (B, T, kv_rank+rope)
        compressed_kv, k_pe = torch.split(compressed_kv, [self.kv_rank, self.rope], dim=-1)
        k_pe = k_pe.view(bsz, q_len, 1, self.rope).transpose(1, 2)  # (B, 1, T, rope)
        kv = self.kv_b_proj(self.kv_a_layernorm(compressed_kv))  # (B, T, H*(nope+v))
        if self.bug == "kv-no-transpose":
            kv = kv.view(bsz, self.num_heads, q_len, self.nope + self.v_dim)  # bug: (B, H?, T?, nope+v)
        else:
            kv = kv.view(bsz, q_len, self.num_heads, self.nope + self.v_dim).transpose(1, 2)  # (B, H, T, nope+v)
        k_nope, value_states = torch.split(kv, [self.nope, self.v_dim], dim=-1)
        q_pe, k_pe = rotary(q_pe, k_pe, position_ids, self.rope)
        query_states = k_pe.new_empty(bsz, self.num_heads, q_len, self.q_head_dim)  # (B, H, T, nope+rope)
        query_states[:, :, :, : self.nope] = q_nope
        query_states[:, :, :, self.nope:] = q_pe
        key_states = k_pe.new_empty(bsz, self.num_heads, q_len, self.q_head_dim)  # (B, H, T, nope+rope)
        key_states[:, :, :, : self.nope] = k_nope
        key_states[:, :, :, self.nope:] = k_pe
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.softmax_scale  # (B, H, T, T)
        mask = torch.full((q_len, q_len), float("-inf")).triu(1)  # (T, T)
        attn_weights = nn.functional.softmax(attn_weights + mask, dim=-1, dtype=torch.float32)
        attn_output = torch.matmul(attn_weights, value_states)  # (B, H, T, v)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, self.num_heads * self.v_dim)
        return self.o_proj(attn_output)  # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims B=2,T=6,D=32,H=4: heads of 8 + 4 rotary features, values of 8."""
    torch.manual_seed(0)
    positions = torch.arange(T).unsqueeze(0).expand(B, T)
    return DeepseekV2Attention(D, H, bug=bug).eval(), (torch.randn(B, T, D), positions)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
