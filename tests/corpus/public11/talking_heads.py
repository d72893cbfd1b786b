"""lucidrains/x-transformers, x_transformers/x_transformers.py (v1.x, ``Attention`` with ``pre_talking_heads``
and ``post_talking_heads``; Shazeer et al. 2020, "Talking-Heads Attention"): q, k, v projections,
``rearrange(t, 'b n (h d) -> b h n d')``, ``einsum('b h i d, b h j d -> b h i j')``, the heads mixed by a learned
``(H, H)`` matrix before the softmax and again after it (``einsum('b h i j, h k -> b k i j')``), a causal mask
by ``masked_fill``, ``einsum('b h i j, b h j d -> b h i d')``, ``rearrange(out, 'b h n d -> b n (h d)')``.

The heads mix by design here: the dependency contract "heads stay apart" does not hold, and truthfully so.

Bugs (argument): ``causal-diagonal``: the causal mask made ``ones(i, j).triu(j - i)`` (offset 0: the diagonal
hidden too), the off-by-one of the triangle's offset: each query hides its own key, and the first query has
none left."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.scale, self.bug = heads, (dim // heads) ** -0.5, bug
        self.to_q, self.to_k, self.to_v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.pre_softmax_talking_heads = nn.Parameter(torch.eye(heads) + 0.1 * torch.randn(heads, heads))
        self.post_softmax_talking_heads = nn.Parameter(torch.eye(heads) + 0.1 * torch.randn(heads, heads))
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        h = self.heads
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))
        dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale             # (B, H, T, T)
        dots = einsum("b h i j, h k -> b k i j", dots, self.pre_softmax_talking_heads)
        i, j = dots.shape[-2:]
        offset = j - i if self.bug == "causal-diagonal" else j - i + 1
        causal_mask = torch.ones((i, j), dtype=torch.bool).triu(offset)            # (T, T), True hides
        dots = dots.masked_fill(causal_mask, -torch.finfo(dots.dtype).max)
        attn = dots.softmax(dim=-1)
        attn = einsum("b h i j, h k -> b k i j", attn, self.post_softmax_talking_heads)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)                       # (B, H, T, d)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("causal-diagonal",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
