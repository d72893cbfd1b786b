"""guoyww/AnimateDiff, animatediff/models/motion_module.py (``TemporalTransformer3DModel``,
``TemporalTransformerBlock``, ``VersatileAttention`` with ``attention_mode="Temporal"``, ``PositionalEncoding``)
over diffusers 0.11's ``CrossAttention`` (``reshape_heads_to_batch_dim``, ``_attention`` with ``baddbmm``,
``reshape_batch_dim_to_heads``): the motion module of a video UNet. A latent video ``[b, c, f, h, w]`` is unfolded
``"b c f h w -> (b f) c h w"``, group-normed, ``permute(0, 2, 3, 1).reshape(batch, h * w, c)``; inside the
attention the frames become the sequence: ``"(b f) d c -> (b d) f c"`` (``d`` the spatial positions, one
sequence of ``f`` frames per pixel), a sinusoidal ``PositionalEncoding`` added over the frames (``x + pe[:,
:x.size(1)]``), the heads folded into the batch, ``softmax(dim=-1)`` over the frames, and back ``"(b d) f c ->
(b f) d c"``; ``proj_out``, the residual, and ``"(b f) c h w -> b c f h w"``.

Bugs: ``frames-outer-unfold``: ``"(f b) d c -> (b d) f c"`` and back ``"(b d) f c -> (f b) d c"`` while the UNet
unfolded the video batch-major (``(b f)``): each pixel's "clip" takes frame ``i`` of video ``i mod b``, the
videos of a batch mixed (consistent both ways, so it runs and the shapes are right); ``way-back-reshape``: the way
back written by hand, as ports of the module do, ``hidden_states.reshape(-1, d, c)`` from ``(b·d, f, c)`` without
moving ``f`` before ``d`` (each "pixel row" of a frame is a run of frames of neighbouring pixels: the pixels and
frames interleaved)."""

import math
import sys

import torch
from einops import rearrange
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=24):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[:, :x.size(1)]                                            # (b·d, f, c)


class VersatileAttention(nn.Module):
    def __init__(self, query_dim, heads, dim_head, bug=""):
        super().__init__()
        inner_dim = heads * dim_head
        self.heads, self.scale, self.bug = heads, dim_head ** -0.5, bug
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner_dim, query_dim), nn.Dropout(0.0)])
        self.pos_encoder = PositionalEncoding(query_dim)

    def reshape_heads_to_batch_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        head_size = self.heads
        tensor = tensor.reshape(batch_size, seq_len, head_size, dim // head_size)   # (b·d, f, heads, d_k)
        tensor = tensor.permute(0, 2, 1, 3)                                          # (b·d, heads, f, d_k)
        return tensor.reshape(batch_size * head_size, seq_len, dim // head_size)     # (b·d·heads, f, d_k)

    def reshape_batch_dim_to_heads(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        head_size = self.heads
        tensor = tensor.reshape(batch_size // head_size, head_size, seq_len, dim)   # (b·d, heads, f, d_k)
        return tensor.permute(0, 2, 1, 3).reshape(batch_size // head_size, seq_len, dim * head_size)  # (b·d, f, c)

    def _attention(self, query, key, value):
        attention_scores = torch.baddbmm(
            torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype),
            query, key.transpose(-1, -2), beta=0, alpha=self.scale)                  # (b·d·heads, f, f)
        attention_probs = attention_scores.softmax(dim=-1)
        hidden_states = torch.bmm(attention_probs, value)                            # (b·d·heads, f, d_k)
        return self.reshape_batch_dim_to_heads(hidden_states)                        # (b·d, f, c)

    def forward(self, hidden_states, video_length):
        d = hidden_states.shape[1]
        if self.bug == "frames-outer-unfold":
            hidden_states = rearrange(hidden_states, "(f b) d c -> (b d) f c", f=video_length)
        else:
            hidden_states = rearrange(hidden_states, "(b f) d c -> (b d) f c", f=video_length)   # (b·d, f, c)
        hidden_states = self.pos_encoder(hidden_states)                              # (b·d, f, c)
        query = self.reshape_heads_to_batch_dim(self.to_q(hidden_states))
        key = self.reshape_heads_to_batch_dim(self.to_k(hidden_states))
        value = self.reshape_heads_to_batch_dim(self.to_v(hidden_states))
        hidden_states = self._attention(query, key, value)                           # (b·d, f, c)
        hidden_states = self.to_out[1](self.to_out[0](hidden_states))
        if self.bug == "frames-outer-unfold":
            return rearrange(hidden_states, "(b d) f c -> (f b) d c", d=d)
        if self.bug == "way-back-reshape":
            return hidden_states.reshape(-1, d, hidden_states.shape[-1])            # read as ((b f), d, c)
        return rearrange(hidden_states, "(b d) f c -> (b f) d c", d=d)               # ((b f), d, c)


class TemporalTransformer3DModel(nn.Module):
    def __init__(self, in_channels, heads, bug=""):
        super().__init__()
        self.norm = nn.GroupNorm(32, in_channels, eps=1e-6)
        self.proj_in = nn.Linear(in_channels, in_channels)
        self.norm1 = nn.LayerNorm(in_channels)
        self.attn1 = VersatileAttention(in_channels, heads, in_channels // heads, bug)
        self.proj_out = nn.Linear(in_channels, in_channels)

    def forward(self, hidden_states):
        video_length = hidden_states.shape[2]
        hidden_states = rearrange(hidden_states, "b c f h w -> (b f) c h w")         # ((b f), c, h, w)
        batch, channel, height, weight = hidden_states.shape
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * weight, channel)   # ((b f), h·w, c)
        hidden_states = self.proj_in(hidden_states)
        hidden_states = self.attn1(self.norm1(hidden_states), video_length) + hidden_states
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch, height, weight, channel).permute(0, 3, 1, 2)   # ((b f), c, h, w)
        output = hidden_states.contiguous() + residual
        return rearrange(output, "(b f) c h w -> b c f h w", f=video_length)         # (b, c, f, h, w)


BUGS = ("frames-outer-unfold", "way-back-reshape")
TWINS = ()
DIMS = ("B=2 F=3 D=32 H=4 Hp=5 Wp=7", "B=2 Fp=3 D=32 H=4 Hp=5 Wp=7")   # (the frames named F, named Fp)
EQUAL = {DIMS[0]: "B=4 F=4 D=32 H=4 Hp=2 Wp=2", DIMS[1]: "B=4 Fp=4 D=32 H=4 Hp=2 Wp=2"}


def build(bug="", B=2, F=3, D=32, H=4, Hp=5, Wp=7, Fp=None):  # noqa: N803
    """A latent video of ``F`` frames (``Fp`` where the sizes name them so) of ``Hp × Wp`` positions at width
    ``D``, as the UNet's previous block leaves it."""
    torch.manual_seed(0)
    frames = F if Fp is None else Fp
    return TemporalTransformer3DModel(D, H, bug=bug).eval(), (torch.randn(B, D, frames, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
