"""facebookresearch/audiocraft, audiocraft/modules/transformer.py (v1.3.0, ``StreamingMultiheadAttention``,
``StreamingTransformerLayer``, ``create_sin_embedding``): MusicGen's decoder self-attention, one packed
``in_proj_weight`` ``[3D, D]`` applied with ``F.linear``, split by ``rearrange(projected, "b t (p h d) -> b t p h
d", p=3, h=H)`` and ``unbind(dim=2)``, the heads moved first with ``rearrange(x, "b t h d -> b h t d")``, the
causal mask built by ``_get_mask`` from query and key positions (``queries_pos[:, None] >= keys_pos[None, :]``,
``torch.where(valid, 0, -inf)``), ``F.scaled_dot_product_attention`` with that additive mask, ``rearrange(x, "b h t
d -> b t (h d)")`` and ``out_proj``; sinusoidal positions added to the input; pre-norm with a residual.

Bugs: ``mask-direction-reversed``: ``_get_mask`` comparing ``keys_pos[None, :] >= queries_pos[:, None]`` (the
comparison written the other way round: each query sees the future instead of the past, the reversed-direction
slip); ``heads-merged-unmoved``: the output ``rearrange(x, "b h t d -> b t (h d)")`` replaced by ``x.reshape(B, T, -1)``
(the heads merged without moving them back behind the tokens: the slip when dropping einops for torch ops;
audiocraft keeps both the xformers ``[B, T, H, d]`` and the torch ``[B, H, T, d]`` layouts, which invites it)."""

import math
import sys

import torch
from einops import rearrange
from torch import nn
from torch.nn import functional as F


def create_sin_embedding(positions, dim, max_period=10000):
    half_dim = dim // 2
    adim = torch.arange(half_dim, device=positions.device).view(1, 1, -1)
    phase = positions / (max_period ** (adim / (half_dim - 1)))
    return torch.cat([torch.cos(phase), torch.sin(phase)], dim=-1)


class StreamingMultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, causal=True, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.causal, self.bug = embed_dim, num_heads, causal, bug
        self.in_proj_weight = nn.Parameter(torch.randn(3 * embed_dim, embed_dim) / math.sqrt(embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def _get_mask(self, current_steps, device, dtype):
        queries_pos = torch.arange(current_steps, device=device).view(-1, 1)
        keys_pos = torch.arange(current_steps, device=device).view(1, -1)
        if self.bug == "mask-direction-reversed":
            valid = keys_pos >= queries_pos
        else:
            valid = queries_pos >= keys_pos
        return torch.where(valid, torch.zeros([], device=device, dtype=dtype),
                           torch.full([], float("-inf"), device=device, dtype=dtype))

    def forward(self, query):
        T = query.shape[1]
        attn_mask = self._get_mask(T, query.device, query.dtype) if self.causal else None
        projected = F.linear(query, self.in_proj_weight)
        packed = rearrange(projected, "b t (p h d) -> b t p h d", p=3, h=self.num_heads)
        q, k, v = packed.unbind(dim=2)
        q, k, v = [rearrange(x, "b t h d -> b h t d") for x in [q, k, v]]
        x = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p=0.0)
        if self.bug == "heads-merged-unmoved":
            x = x.reshape(x.shape[0], T, -1)
        else:
            x = rearrange(x, "b h t d -> b t (h d)")
        return self.out_proj(x)


class StreamingTransformerLayer(nn.Module):
    def __init__(self, d_model, num_heads, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.self_attn = StreamingMultiheadAttention(d_model, num_heads, bug=bug)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.linear1 = nn.Linear(d_model, 2 * d_model, bias=False)
        self.linear2 = nn.Linear(2 * d_model, d_model, bias=False)

    def forward(self, x):
        x = x + self.self_attn(self.norm1(x))
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


class StreamingTransformer(nn.Module):
    def __init__(self, d_model, num_heads, num_layers=1, bug=""):
        super().__init__()
        self.layers = nn.ModuleList(StreamingTransformerLayer(d_model, num_heads, bug) for _ in range(num_layers))

    def forward(self, x):
        B, T, C = x.shape
        positions = torch.arange(T, device=x.device).view(1, -1, 1)
        x = x + create_sin_embedding(positions, C)
        for layer in self.layers:
            x = layer(x)
        return x


BUGS = ("mask-direction-reversed", "heads-merged-unmoved")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    model = StreamingTransformer(D, H, bug=bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
