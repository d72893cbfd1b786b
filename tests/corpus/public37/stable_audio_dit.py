"""Stability-AI/stable-audio-tools, stable_audio_tools/models/transformer.py and dit.py (v0.0.16, ``Attention``,
``RotaryEmbedding``, ``apply_rotary_pos_emb``, ``ContinuousTransformer``, ``DiffusionTransformer``): Stable Audio's
DiT over audio latents ``(B, C, T)``: a residual 1x1 ``Conv1d`` pre-conv, ``rearrange("b c t -> b t c")``,
``project_in``, the timestep's Fourier features embedded and *prepended* as one token, rotary over part of each
head (``max(dim_heads // 2, 32)`` features, the rest passed through), ``to_qkv(x).chunk(3, dim=-1)``,
``rearrange("b n (h d) -> b h n d")``, ``scaled_dot_product_attention``, ``rearrange("b h n d -> b n (h d)")``,
``project_out``, the prepended token dropped (``[:, :, prepend_length:]``) after ``rearrange("b t c -> b c t")``.

Bugs: ``out-reshape-without-transpose``: the attention's output ``(B, H, N, d)`` ``reshape(B, N, -1)``ed instead of
``rearrange("b h n d -> b n (h d)")`` (the natural slip when einops is dropped); ``rotate-half-interleaved``:
``rotate_half`` rewritten with ``rearrange("... (d j) -> ... d j", j=2)`` (lucidrains' interleaved pairs, as in
rotary-embedding-torch) while the table stays ``cat((freqs, freqs))`` (half-split): the rotation pairs feature
``2i`` with ``2i+1`` where the table pairs ``i`` with ``i + r/2`` (cf. the interleaved/half-split mix-ups reported
against ports of GPT-NeoX / Llama rotary)."""

import math
import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class FourierFeatures(nn.Module):
    def __init__(self, in_features, out_features, std=1.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn([out_features // 2, in_features]) * std)

    def forward(self, input):
        f = 2 * math.pi * input @ self.weight.T
        return torch.cat([f.cos(), f.sin()], dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward_from_seq_len(self, seq_len):
        t = torch.arange(seq_len).type_as(self.inv_freq)
        freqs = torch.einsum("i , j -> i j", t, self.inv_freq)
        return torch.cat((freqs, freqs), dim=-1)


def rotate_half(x, bug=""):
    if bug == "rotate-half-interleaved":
        x = rearrange(x, "... (d j) -> ... d j", j=2)
        x1, x2 = x.unbind(dim=-1)
        return rearrange(torch.stack((-x2, x1), dim=-1), "... d j -> ... (d j)")
    x = rearrange(x, "... (j d) -> ... j d", j=2)
    x1, x2 = x.unbind(dim=-2)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(t, freqs, bug=""):
    rot_dim, seq_len = freqs.shape[-1], t.shape[-2]
    freqs = freqs[-seq_len:, :]
    t, t_unrotated = t[..., :rot_dim], t[..., rot_dim:]
    t = (t * freqs.cos()) + (rotate_half(t, bug) * freqs.sin())
    return torch.cat((t, t_unrotated), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, dim_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = dim // dim_heads, bug
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x, rotary_pos_emb):
        h = self.num_heads
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=h), (q, k, v))
        q = apply_rotary_pos_emb(q, rotary_pos_emb, self.bug)
        k = apply_rotary_pos_emb(k, rotary_pos_emb, self.bug)
        out = F.scaled_dot_product_attention(q, k, v)
        if self.bug == "out-reshape-without-transpose":
            out = out.reshape(out.shape[0], out.shape[2], -1)
        else:
            out = rearrange(out, " b h n d -> b n (h d)")
        return self.to_out(out)


class TransformerBlock(nn.Module):
    def __init__(self, dim, dim_heads, bug=""):
        super().__init__()
        self.pre_norm, self.ff_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.self_attn = Attention(dim, dim_heads, bug)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))

    def forward(self, x, rotary_pos_emb):
        x = x + self.self_attn(self.pre_norm(x), rotary_pos_emb)
        return x + self.ff(self.ff_norm(x))


class DiffusionTransformer(nn.Module):
    def __init__(self, io_channels, embed_dim, dim_heads, depth=2, bug=""):
        super().__init__()
        self.timestep_features = FourierFeatures(1, 32)
        self.to_timestep_embed = nn.Sequential(nn.Linear(32, embed_dim), nn.SiLU(), nn.Linear(embed_dim, embed_dim))
        self.preprocess_conv = nn.Conv1d(io_channels, io_channels, 1, bias=False)
        self.postprocess_conv = nn.Conv1d(io_channels, io_channels, 1, bias=False)
        self.project_in = nn.Linear(io_channels, embed_dim, bias=False)
        self.project_out = nn.Linear(embed_dim, io_channels, bias=False)
        self.rotary_pos_emb = RotaryEmbedding(max(dim_heads // 2, 4))
        self.layers = nn.ModuleList(TransformerBlock(embed_dim, dim_heads, bug) for _ in range(depth))

    def forward(self, x, t):
        timestep_embed = self.to_timestep_embed(self.timestep_features(t[:, None]))
        prepend_inputs = timestep_embed.unsqueeze(1)
        prepend_length = prepend_inputs.shape[1]
        x = self.preprocess_conv(x) + x
        x = rearrange(x, "b c t -> b t c")
        x = self.project_in(x)
        x = torch.cat((prepend_inputs, x), dim=-2)
        rotary_pos_emb = self.rotary_pos_emb.forward_from_seq_len(x.shape[1])
        for layer in self.layers:
            x = layer(x, rotary_pos_emb)
        output = rearrange(self.project_out(x), "b t c -> b c t")[:, :, prepend_length:]
        return self.postprocess_conv(output) + output


BUGS = ("out-reshape-without-transpose", "rotate-half-interleaved")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return DiffusionTransformer(8, D, D // H, bug=bug).eval(), (torch.randn(B, 8, T), torch.rand(B))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
