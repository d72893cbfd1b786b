"""lucidrains/bottleneck-transformer-pytorch, ``bottleneck_transformer_pytorch/bottleneck_transformer_pytorch.py``
(v0.1.4, ``Attention`` with ``AbsPosEmb``, the MHSA that replaces the 3x3 convolution in BoTNet's last stage, after
Srinivas et al.'s Bottleneck Transformers): one 1x1 convolution ``to_qkv`` to ``3 * heads * dim_head`` channels,
``chunk(3, dim=1)``, each ``rearrange('b (h d) x y -> b h (x y) d')``; ``q = q * scale``; content logits
``einsum('b h i d, b h j d -> b h i j')``; the absolute 2-D position logits: a ``height`` table ``(Hp, d)`` and a
``width`` table ``(Wp, d)`` added into ``(Hp, Wp, d)``, flattened ``'h w d -> (h w) d'`` and read by the queries
``einsum('b h i d, j d -> b h i j')``; ``softmax(dim=-1)``; ``einsum('b h i j, b h j d -> b h i d')``; back with
``rearrange('b h (x y) d -> b (h d) x y')``.

Bugs: ``pos-table-columns-first``: the position table flattened ``'h w d -> (w h) d'`` (the slip of the repository's
``RelPosEmb`` discussion about which grid axis comes first: key j's position logit is the one of another position,
rows and columns swapped, whenever Hp != Wp the table no longer follows the tokens' row-major order);
``merge-without-permute``: the output written back as ``out.transpose(1, 2).reshape(b, -1, h, w)`` (``(b, N, heads,
d)`` reshaped straight to ``(b, C, Hp, Wp)``: positions and channels interleave, the slip of hand ports of
``rearrange``)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class AbsPosEmb(nn.Module):
    def __init__(self, height, width, dim_head, bug=""):
        super().__init__()
        self.bug = bug
        scale = dim_head ** -0.5
        self.height = nn.Parameter(torch.randn(height, dim_head) * scale)
        self.width = nn.Parameter(torch.randn(width, dim_head) * scale)

    def forward(self, q):
        emb = rearrange(self.height, 'h d -> h () d') + rearrange(self.width, 'w d -> () w d')
        pattern = 'h w d -> (w h) d' if self.bug == "pos-table-columns-first" else 'h w d -> (h w) d'
        emb = rearrange(emb, pattern)
        return einsum('b h i d, j d -> b h i j', q, emb)


class Attention(nn.Module):
    def __init__(self, *, dim, fmap_size, heads=4, dim_head=8, bug=""):
        super().__init__()
        self.bug = bug
        self.heads, self.scale = heads, dim_head ** -0.5
        self.to_qkv = nn.Conv2d(dim, heads * dim_head * 3, 1, bias=False)
        self.pos_emb = AbsPosEmb(*fmap_size, dim_head, bug)

    def forward(self, fmap):
        heads, b, _, h, w = self.heads, *fmap.shape
        q, k, v = self.to_qkv(fmap).chunk(3, dim=1)
        q, k, v = (rearrange(t, 'b (h d) x y -> b h (x y) d', h=heads) for t in (q, k, v))
        q = q * self.scale
        sim = einsum('b h i d, b h j d -> b h i j', q, k)
        sim = sim + self.pos_emb(q)
        attn = sim.softmax(dim=-1)
        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        if self.bug == "merge-without-permute":
            return out.transpose(1, 2).reshape(b, -1, h, w)
        return rearrange(out, 'b h (x y) d -> b (h d) x y', x=h, y=w)


BUGS = ("pos-table-columns-first", "merge-without-permute")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    model = Attention(dim=D, fmap_size=(Hp, Wp), heads=H, dim_head=D // H, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
