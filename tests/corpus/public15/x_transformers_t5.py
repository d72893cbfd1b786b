"""lucidrains/x-transformers, x_transformers/x_transformers.py (``Attention``, ``RelativePositionBias``): q, k, v
projections, ``rearrange(t, 'b n (h d) -> b h n d', h=h)``; ``dots = einsum('b h i d, b h j d -> b h i j', q,
k) * scale``; the T5 bias: ``q_pos = arange(j - i, j)``, ``k_pos = arange(j)``, ``rel_pos = rearrange(k_pos,
'j -> 1 j') - rearrange(q_pos, 'i -> i 1')``, ``_relative_position_bucket(rel_pos, causal=True)`` (``n =
-relative_position``, ``n = max(n, 0)``, exact buckets below ``max_exact`` and log-spaced ones above),
``values = self.relative_attention_bias(rp_bucket)``, ``rearrange(values, 'i j h -> h i j')``, added to the
scores; the causal mask ``ones(i, j).triu(j - i + 1)`` and ``masked_fill(causal_mask, -max_neg_value)`` with
``max_neg_value = -torch.finfo(dots.dtype).max``; ``attn = dots.softmax(dim=-1)``; ``einsum('b h i j, b h j d
-> b h i d')``, ``rearrange(out, 'b h n d -> b n (h d)')``.

Bugs (argument): ``rel-pos-q-minus-k``: ``rel_pos = q_pos[:, None] - k_pos[None, :]`` (the sign of T5's
relative position flipped: with ``causal=True`` every past key clamps to bucket 0 and only future offsets,
masked anyway, get buckets: the bias no longer depends on distance); ``bias-heads-last``: the bias added as
``rearrange(values, 'i j h -> i h j')`` broadcast onto ``(b, h, i, j)`` (runs when i = h: here at equal sizes
only; at distinct sizes it raises)."""

import math
import sys

import torch
from einops import rearrange
from torch import einsum, nn


class RelativePositionBias(nn.Module):
    def __init__(self, scale, causal=True, num_buckets=8, max_distance=16, heads=4, bug=""):
        super().__init__()
        self.scale, self.causal, self.bug = scale, causal, bug
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.relative_attention_bias = nn.Embedding(num_buckets, heads)

    @staticmethod
    def _relative_position_bucket(relative_position, causal=True, num_buckets=8, max_distance=16):
        ret, n = 0, -relative_position
        if not causal:
            num_buckets //= 2
            ret += (n < 0).long() * num_buckets
            n = torch.abs(n)
        else:
            n = torch.max(n, torch.zeros_like(n))
        max_exact = num_buckets // 2
        is_small = n < max_exact
        val_if_large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                                    * (num_buckets - max_exact)).long()
        val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
        return ret + torch.where(is_small, n, val_if_large)

    def forward(self, i, j):
        q_pos = torch.arange(j - i, j, dtype=torch.long)
        k_pos = torch.arange(j, dtype=torch.long)
        if self.bug == "rel-pos-q-minus-k":
            rel_pos = rearrange(q_pos, "i -> i 1") - rearrange(k_pos, "j -> 1 j")
        else:
            rel_pos = rearrange(k_pos, "j -> 1 j") - rearrange(q_pos, "i -> i 1")
        rp_bucket = self._relative_position_bucket(rel_pos, causal=self.causal, num_buckets=self.num_buckets,
                                                   max_distance=self.max_distance)
        values = self.relative_attention_bias(rp_bucket)
        pattern = "i j h -> i h j" if self.bug == "bias-heads-last" else "i j h -> h i j"
        return rearrange(values, pattern) * self.scale


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.to_q, self.to_k, self.to_v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.rel_pos = RelativePositionBias(scale=self.scale**-1 * 0.1, heads=heads, bug=bug)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):                                                        # (B, T, D)
        h = self.heads
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))
        dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        i, j = dots.shape[-2:]
        dots = dots + self.rel_pos(i, j)
        max_neg_value = -torch.finfo(dots.dtype).max
        causal_mask = torch.ones((i, j), dtype=torch.bool).triu(j - i + 1)
        dots = dots.masked_fill(causal_mask, max_neg_value)
        attn = dots.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


BUGS = ("rel-pos-q-minus-k", "bias-heads-last")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
