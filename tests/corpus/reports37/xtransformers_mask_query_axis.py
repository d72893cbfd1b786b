"""lucidrains/x-transformers issue #172 ("Question: normalizing mask shape"; lucidrains: "if you find ``mask =
rearrange(mask, 'b i -> b 1 i 1')`` in the code, it is likely an error"): a key padding mask ``[B, L]`` expanded
with ``rearrange(mask, 'b i -> b 1 i 1')`` lands on the *query* axis of the ``b h i j`` similarities, so a padded
query row is wiped out while every real query still attends to the padded keys. The padding mask of the keys is
``rearrange(mask, 'b j -> b 1 1 j')``.

The idiom (x-transformers' ``Attention``, ported as is, einops included): ``to_q``/``to_k``/``to_v``,
``rearrange(t, 'b n (h d) -> b h n d')``, ``sim = einsum('b h i d, b h j d -> b h i j', q, k) * scale``,
``masked_fill(~mask, -torch.finfo(sim.dtype).max)``, softmax over ``j``, ``einsum('b h i j, b h j d -> b h i d')``
and ``rearrange(out, 'b h n d -> b n (h d)')``, ``to_out``; an encoder block (pre-norm, residual, feed-forward)
over a batch whose rows have 2 and 1 padding positions.

Bug (argument): ``mask-query-axis``: the key padding mask rearranged ``'b i -> b 1 i 1'``."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn

BUGS = ("mask-query-axis",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug, self.heads = bug, heads
        dim_head = dim // heads
        self.scale = dim_head ** -0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, mask):
        h = self.heads
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))      # (B, H, T, d)
        sim = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale                  # (B, H, T, T)
        if self.bug == "mask-query-axis":
            mask = rearrange(mask, "b i -> b 1 i 1")                                    # (B, 1, T, 1)
        else:
            mask = rearrange(mask, "b j -> b 1 1 j")                                    # (B, 1, 1, T)
        sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)                            # (B, H, T, d)
        out = rearrange(out, "b h n d -> b n (h d)")                                    # (B, T, D)
        return self.to_out(out)


class Encoder(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, bug)
        self.ff = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

    def forward(self, x, mask):
        x = x + self.attn(self.norm1(x), mask)
        return x + self.ff(self.norm2(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T - 2, T - 1] * B)[:B]
    mask = torch.arange(T)[None, :] < lengths[:, None]                                 # (B, T): True = real
    return Encoder(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
