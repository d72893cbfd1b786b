"""esceptico/perceiver-io issue #9 ("Bug in MultiHeadAttention"; fixed in pull request #10, "Attention scale bug"):
``MultiHeadAttention.forward`` in src/perceiver_io/attention.py computed ``attention = (q @ k.transpose(-2, -1) /
self.scale)`` with ``self.scale = self.qk_head_dim ** -0.5``, dividing by the inverse square root: the scores were
multiplied by ``sqrt(d)`` instead of divided by it (a factor ``d`` too large), and the softmax came out far too
peaked. "``self.scale`` should be multiplied instead of the divide"; the maintainer: "Sorry for such a dumb
mistake".

The idiom (the library at the reported commit, ``PerceiverEncoder`` with its ``CrossAttention`` and
``SelfAttention`` blocks): ``k``/``q``/``v`` projections, ``rearrange(t, 'b s (n h) -> b n s h', h=head_dim)``, the
scaled scores, the ``(B, 1, 1, M)`` input mask added as ``(1 - mask) * finfo.min``, softmax, the masked weights
zeroed again, ``rearrange(..., 'b n s h -> b s (n h)')`` and ``projection``; learned latents expanded over the
batch cross-attend to the padded inputs (query residual, feed-forward), then one latent self-attention block.

Bug (argument): ``scale-divided``: the scores divided by ``self.scale`` (the reported line)."""

import sys

import torch
from einops import rearrange
from torch import nn

BUGS = ("scale-divided",)
TWINS = ()
DIMS = ("B=2 T=7 N=3 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 N=3 D=32 H=4"}


class MultiHeadAttention(nn.Module):
    def __init__(self, kv_dim, q_dim, *, num_heads=1, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.qk_head_dim = self.v_head_dim = q_dim // num_heads
        self.k = nn.Linear(kv_dim, q_dim)
        self.q = nn.Linear(q_dim, q_dim)
        self.v = nn.Linear(kv_dim, q_dim)
        self.projection = nn.Linear(q_dim, q_dim)
        self.scale = self.qk_head_dim ** -0.5

    def forward(self, inputs_kv, inputs_q, attention_mask=None):
        k, q, v = self.k(inputs_kv), self.q(inputs_q), self.v(inputs_kv)
        k = rearrange(k, 'b s (n h) -> b n s h', h=self.qk_head_dim)                 # (B, H, T, d)
        q = rearrange(q, 'b s (n h) -> b n s h', h=self.qk_head_dim)                 # (B, H, N, d)
        v = rearrange(v, 'b s (n h) -> b n s h', h=self.v_head_dim)                  # (B, H, T, d)
        if self.bug == "scale-divided":
            attention = (q @ k.transpose(-2, -1) / self.scale)                       # (B, H, N, T)
        else:
            attention = (q @ k.transpose(-2, -1) * self.scale)                       # (B, H, N, T)
        if attention_mask is not None:
            min_value = torch.finfo(attention.dtype).min
            extended_mask = (1 - attention_mask) * min_value
            attention = attention + extended_mask
        attention = attention.softmax(dim=-1)
        if attention_mask is not None:
            attention = attention.masked_fill((1 - attention_mask).bool(), value=0)
        weighted = rearrange(attention @ v, 'b n s h -> b s (n h)')                  # (B, N, D)
        return self.projection(weighted)


class CrossAttention(nn.Module):
    def __init__(self, *, kv_dim, q_dim, num_heads, bug=""):
        super().__init__()
        self.kv_layer_norm, self.q_layer_norm = nn.LayerNorm(kv_dim), nn.LayerNorm(q_dim)
        self.qkv_layer_norm = nn.LayerNorm(q_dim)
        self.attention = MultiHeadAttention(kv_dim, q_dim, num_heads=num_heads, bug=bug)
        self.mlp = nn.Sequential(nn.Linear(q_dim, q_dim), nn.GELU(), nn.Linear(q_dim, q_dim))

    def forward(self, inputs_kv, inputs_q, attention_mask=None):
        attention = self.attention(self.kv_layer_norm(inputs_kv), self.q_layer_norm(inputs_q), attention_mask)
        x = inputs_q + attention
        return x + self.mlp(self.qkv_layer_norm(x))


class SelfAttention(nn.Module):
    def __init__(self, *, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.layer_norm, self.qkv_layer_norm = nn.LayerNorm(hidden_dim), nn.LayerNorm(hidden_dim)
        self.attention = MultiHeadAttention(hidden_dim, hidden_dim, num_heads=num_heads, bug=bug)
        self.mlp = nn.Sequential(nn.Linear(hidden_dim, 4 * hidden_dim), nn.GELU(),
                                 nn.Linear(4 * hidden_dim, hidden_dim))

    def forward(self, x):
        x_norm = self.layer_norm(x)
        x = x + self.attention(x_norm, x_norm)
        return x + self.mlp(self.qkv_layer_norm(x))


class PerceiverEncoder(nn.Module):
    def __init__(self, num_latents, latent_dim, input_dim, num_heads, bug=""):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_latents, latent_dim))
        self.cross_attn = CrossAttention(kv_dim=input_dim, q_dim=latent_dim, num_heads=num_heads, bug=bug)
        self.self_attn = SelfAttention(hidden_dim=latent_dim, num_heads=num_heads, bug=bug)

    def forward(self, x, kv_mask=None):
        batch_size = x.size(0)
        if kv_mask is not None:
            kv_mask = kv_mask[:, None, None, :]                                      # (B, 1, 1, T)
        latents = self.cross_attn(x, self.latents.repeat(batch_size, 1, 1), attention_mask=kv_mask)   # (B, N, D)
        return self.self_attn(latents)


def build(bug="", B=2, T=7, N=3, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T, T - 3] * B)[:B]
    kv_mask = (torch.arange(T)[None, :] < lengths[:, None]).float()                  # (B, T): 1 = real
    return PerceiverEncoder(N, D, D, H, bug).eval(), (torch.randn(B, T, D), kv_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
