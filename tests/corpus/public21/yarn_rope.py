"""jquesnelle/yarn, ``scaled_rope/LlamaYaRNScaledRotaryEmbedding.py`` (2023, ``LlamaYaRNScaledRotaryEmbedding``,
``find_correction_range``, ``linear_ramp_mask``, ``get_mscale``) with Llama's attention (``q_proj``/``k_proj``/
``v_proj``, ``view(B, T, H, d).transpose(1, 2)``, ``rotate_half``, ``apply_rotary_pos_emb(q, k, cos, sin,
position_ids)``): ``inv_freq = inv_freq_interpolation * (1 - mask) + inv_freq_extrapolation * mask`` with the
mask a linear ramp over the ``d / 2`` frequencies between the correction range; ``cos``/``sin`` of
``outer(t, inv_freq)`` doubled by ``cat((freqs, freqs), -1)`` and scaled by ``mscale = 0.1 * ln(scale) + 1``;
``cos[position_ids].unsqueeze(1)``; softmax over the keys of the causal scores; ``o_proj``.

Bugs (argument): ``rotate-half-unsigned``: ``rotate_half`` as ``cat((x2, x1), -1)`` (the minus sign dropped: no
longer a rotation, a slip seen in ports of ``rotate_half``); ``positions-from-batch``: ``cos[position_ids]``
indexed with ``position_ids`` of shape ``(B,)`` (``torch.arange(B)``, the batch index where the token index is
meant, the slip of building the ids from the wrong ``shape[0]``)."""

import math
import sys

import torch
from torch import nn


def find_correction_dim(num_rotations, dim, base=10000, max_position_embeddings=2048):
    return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))


def find_correction_range(low_rot, high_rot, dim, base=10000, max_position_embeddings=2048):
    low = math.floor(find_correction_dim(low_rot, dim, base, max_position_embeddings))
    high = math.ceil(find_correction_dim(high_rot, dim, base, max_position_embeddings))
    return max(low, 0), min(high, dim - 1)


def linear_ramp_mask(low, high, dim):
    if low == high:
        high += 0.001
    linear_func = (torch.arange(dim, dtype=torch.float32) - low) / (high - low)
    return torch.clamp(linear_func, 0, 1)


def get_mscale(scale=1):
    return 1.0 if scale <= 1 else 0.1 * math.log(scale) + 1.0


class LlamaYaRNScaledRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=64, base=10000, scale=4, original_max_position_embeddings=16):
        super().__init__()
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        inv_freq_extrapolation = 1.0 / pos_freqs
        inv_freq_interpolation = 1.0 / (scale * pos_freqs)
        low, high = find_correction_range(32, 1, dim, base, original_max_position_embeddings)
        inv_freq_mask = 1 - linear_ramp_mask(low, high, dim // 2)
        inv_freq = inv_freq_interpolation * (1 - inv_freq_mask) + inv_freq_extrapolation * inv_freq_mask
        self.mscale = get_mscale(scale)
        t = torch.arange(max_position_embeddings, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos() * self.mscale, persistent=False)
        self.register_buffer("sin_cached", emb.sin() * self.mscale, persistent=False)

    def forward(self, x, seq_len):
        return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)


class Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.rotary_emb = LlamaYaRNScaledRotaryEmbedding(self.head_dim)

    def rotate_half(self, x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((x2, x1), dim=-1) if self.bug == "rotate-half-unsigned" else torch.cat((-x2, x1), dim=-1)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        n = bsz if self.bug == "positions-from-batch" else q_len
        position_ids = torch.arange(n).unsqueeze(0).expand(bsz, -1)
        cos, sin = self.rotary_emb(v, seq_len=q_len)
        cos, sin = cos[position_ids].unsqueeze(1), sin[position_ids].unsqueeze(1)   # (B, 1, T, d)
        q = q * cos + self.rotate_half(q) * sin
        k = k * cos + self.rotate_half(k) * sin
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        causal = torch.full((q_len, q_len), float("-inf")).triu(1)
        attn_weights = nn.functional.softmax(attn_weights + causal, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


BUGS = ("rotate-half-unsigned", "positions-from-batch")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
