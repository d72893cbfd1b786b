"""lucidrains/audiolm-pytorch pull request #265 ("fix wrong tensor assignment of the output of attention"; the
same slip asked about in issue #268): when the key/value cache was added to ``Transformer.forward``, the
self-attention's call became ``attn_out, layer_kv_cache = attn(x, ..., return_kv_cache=True)`` but the
residual kept adding ``x``: ``x = x + residual`` instead of ``x = attn_out + residual``, so every layer's
self-attention was computed and thrown away (each block only the feedforward). The fix assigns the attention's
output back to ``x``.

The idiom (audiolm-pytorch's ``Transformer``): pre-norm ``Attention`` with ``to_q`` and a joint ``to_kv``
(``nn.Linear(dim, inner_dim * 2)``, ``chunk(2, dim=-1)``), einops ``rearrange(t, 'b n (h d) -> b h n d')``,
a relative position bias added to the scores, ``F.scaled_dot_product_attention`` with a causal mask,
``rearrange(out, 'b h n d -> b n (h d)')``, ``to_out``; the layer returns its cache; ``FeedForward`` (GELU);
two layers and a final norm.

Bug (argument): ``attn-out-unused``: ``x = x + residual`` after the attention (its output dropped)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("attn-out-unused",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RelativePositionBias(nn.Module):
    def __init__(self, heads, max_distance=16):
        super().__init__()
        self.max_distance = max_distance
        self.rel_pos_bias = nn.Embedding(2 * max_distance + 1, heads)

    def forward(self, n):
        pos = torch.arange(n)
        rel_pos = (pos[None, :] - pos[:, None]).clamp(-self.max_distance, self.max_distance) + self.max_distance
        return rearrange(self.rel_pos_bias(rel_pos), 'i j h -> h i j')


class Attention(nn.Module):
    def __init__(self, dim, heads, causal=True):
        super().__init__()
        self.heads, self.causal = heads, causal
        dim_head = dim // heads
        inner_dim = dim_head * heads
        self.norm = nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

    def forward(self, x, attn_bias=None, kv_cache=None, return_kv_cache=False):
        x = self.norm(x)
        q, k, v = self.to_q(x), *self.to_kv(x).chunk(2, dim=-1)
        q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=self.heads) for t in (q, k, v))
        kv_cache_out = torch.stack((k, v))
        n = q.shape[-2]
        causal_mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        bias = attn_bias.masked_fill(causal_mask, float("-inf"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        out = self.to_out(rearrange(out, 'b h n d -> b n (h d)'))
        return (out, kv_cache_out) if return_kv_cache else out


class FeedForward(nn.Sequential):
    def __init__(self, dim, mult=2):
        super().__init__(nn.LayerNorm(dim), nn.Linear(dim, dim * mult), nn.GELU(), nn.Linear(dim * mult, dim))


class Transformer(nn.Module):
    def __init__(self, dim, heads, depth=2, bug=""):
        super().__init__()
        self.bug = bug
        self.rel_pos_bias = RelativePositionBias(heads)
        self.layers = nn.ModuleList([nn.ModuleList([Attention(dim, heads), FeedForward(dim)]) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        rel_pos_bias = self.rel_pos_bias(x.shape[1])
        new_kv_cache = []
        for attn, ff in self.layers:
            residual = x
            attn_out, layer_kv_cache = attn(x, attn_bias=rel_pos_bias, return_kv_cache=True)
            new_kv_cache.append(layer_kv_cache)
            if self.bug == "attn-out-unused":
                x = x + residual                                                           # [residual]
            else:
                x = attn_out + residual                                                    # [residual]
            x = ff(x) + x
        return self.norm(x), new_kv_cache


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Transformer(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
