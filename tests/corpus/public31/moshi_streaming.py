"""kyutai-labs/moshi, moshi/moshi/modules/transformer.py (v0.2, ``StreamingMultiheadAttention``,
``apply_rope`` in moshi/modules/rope.py): the streaming transformer of Moshi/Mimi. A fused ``in_proj``
``(B, T, 3 D)`` is ``rearrange``d ``"b t (p h d) -> p b h t d"``, rotary applied on interleaved pairs (the last
axis viewed ``(..., d/2, 2)``), then the context-limited causal bias built from positions:
``delta = pos_q[:, None] - pos_k[None, :]``, ``attn_bias = (pos_k >= 0) & (delta >= 0)`` and ``delta < context``,
``scaled_dot_product_attention(q, k, v, attn_bias)``, ``rearrange("b h t d -> b t (h d)")``, ``out_proj``.

Bugs: ``delta-reversed``: ``delta = pos_k[None, :] - pos_q[:, None]`` (a natural slip: each query sees the
future); ``context-off-by-one``: ``delta <= context`` where ``delta < context`` is meant (the window one key
wider than the configured context; the kind of slip the sliding-window reports are made of)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def apply_rope(q, k, offset, max_period=10000.0):
    B, H, T, D = q.shape
    ds = torch.arange(D // 2, dtype=torch.float32)
    freqs = torch.exp(ds * (-torch.log(torch.tensor(max_period)) * 2 / D))
    ts = offset + torch.arange(T, dtype=torch.float32).view(-1, 1)
    q = q.view(B, H, T, D // 2, 2)
    k = k.view(B, H, T, D // 2, 2)
    qr, qi = q[..., 0].float(), q[..., 1].float()
    kr, ki = k[..., 0].float(), k[..., 1].float()
    rotr, roti = torch.cos(freqs * ts), torch.sin(freqs * ts)
    qo = torch.stack([qr * rotr - qi * roti, qr * roti + qi * rotr], dim=-1)
    ko = torch.stack([kr * rotr - ki * roti, kr * roti + ki * rotr], dim=-1)
    return qo.view(B, H, T, D), ko.view(B, H, T, D)


class StreamingMultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, context, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.context, self.bug = embed_dim, num_heads, context, bug
        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, query):
        T = query.shape[1]
        offset = 0
        projected = self.in_proj(query)
        q, k, v = rearrange(projected, "b t (p h d) -> p b h t d", p=3, h=self.num_heads)
        q, k = apply_rope(q, k, offset)
        pos_k = torch.arange(T, dtype=torch.long).view(-1)
        pos_q = offset + torch.arange(T, dtype=torch.long).view(-1)
        if self.bug == "delta-reversed":
            delta = pos_k[None, :] - pos_q[:, None]
        else:
            delta = pos_q[:, None] - pos_k[None, :]
        attn_bias = (pos_k >= 0) & (delta >= 0)
        if self.bug == "context-off-by-one":
            attn_bias = attn_bias & (delta <= self.context)
        else:
            attn_bias = attn_bias & (delta < self.context)
        x = F.scaled_dot_product_attention(q, k, v, attn_bias, dropout_p=0.0)
        x = rearrange(x, "b h t d -> b t (h d)")
        return self.out_proj(x)


class StreamingTransformerLayer(nn.Module):
    def __init__(self, d_model, num_heads, context, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.self_attn = StreamingMultiheadAttention(d_model, num_heads, context, bug)
        self.linear1, self.linear2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        x = x + self.self_attn(self.norm1(x))
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


BUGS = ("delta-reversed", "context-off-by-one")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return StreamingTransformerLayer(D, H, 3, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
