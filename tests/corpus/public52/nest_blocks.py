"""lucidrains/vit-pytorch, vit_pytorch/nest.py (``NesT``, ``Transformer``, ``Attention``, ``Aggregate``; file as
of commit b80676e, 2025): a channels-first feature map ``[b, c, h, w]`` cut into ``K x K`` blocks folded into the
batch, ``rearrange(x, 'b c (b1 h) (b2 w) -> (b b1 b2) c h w')``; a learned position table over the ``Hp·Wp`` tokens
of a block (``rearrange(pos_emb, '(h w) -> () () h w')``); attention inside each block with 1x1 convolutions for
``qkv`` (``chunk(3, dim=1)``, ``rearrange(t, 'b (h d) x y -> b h (x y) d')``, ``einsum`` scores, softmax, ``einsum``
with the values, back by ``rearrange(out, 'b h (x y) d -> b (h d) x y')``, ``to_out`` conv); the blocks put back
``'(b b1 b2) c h w -> b c (b1 h) (b2 w)'``; the block aggregation ``Conv2d(3, padding=1)``, a channel LayerNorm,
``MaxPool2d(3, stride=2, padding=1)``.

Bugs: ``blocks-merged-batch-last``: the blocks put back with ``'(b1 b2 b) c h w -> ...'`` (the fold order of the
split not mirrored: the blocks of the images are dealt out across images and positions); ``heads-merged-d-major``:
the heads merged as ``'b h (x y) d -> b (d h) x y'`` (the channels of ``to_out`` read head-minor, the order slip
of a hand-written merge)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class LayerNorm(nn.Module):                                                          # over the channels of b c h w
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.g = nn.Parameter(torch.ones(1, dim, 1, 1))
        self.b = nn.Parameter(torch.zeros(1, dim, 1, 1))

    def forward(self, x):
        var = torch.var(x, dim=1, unbiased=False, keepdim=True)
        mean = torch.mean(x, dim=1, keepdim=True)
        return (x - mean) / (var + self.eps).sqrt() * self.g + self.b


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        dim_head = dim // heads
        self.heads, self.bug = heads, bug
        self.scale = dim_head ** -0.5
        self.norm = LayerNorm(dim)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1, bias=False)
        self.to_out = nn.Conv2d(dim, dim, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=1)
        q, k, v = (rearrange(t, "b (h d) x y -> b h (x y) d", h=self.heads) for t in qkv)   # (b·K·K, h, Hp·Wp, d)
        dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale              # (b·K·K, h, Hp·Wp, Hp·Wp)
        attn = dots.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)                         # (b·K·K, h, Hp·Wp, d)
        pattern = "b h (x y) d -> b (d h) x y" if self.bug == "heads-merged-d-major" else "b h (x y) d -> b (h d) x y"
        out = rearrange(out, pattern, x=h, y=w)                                      # (b·K·K, c, Hp, Wp)
        return self.to_out(out)


class NesTLevel(nn.Module):
    def __init__(self, dim, heads, block_size, seq_len, bug=""):
        super().__init__()
        self.block_size, self.bug = block_size, bug
        self.pos_emb = nn.Parameter(torch.randn(seq_len))
        self.attn = Attention(dim, heads, bug)
        self.ff = nn.Sequential(LayerNorm(dim), nn.Conv2d(dim, dim * 2, 1), nn.GELU(), nn.Conv2d(dim * 2, dim, 1))
        self.aggregate = nn.Sequential(nn.Conv2d(dim, dim * 2, 3, padding=1), LayerNorm(dim * 2),
                                       nn.MaxPool2d(3, stride=2, padding=1))

    def forward(self, x):
        bs = self.block_size
        x = rearrange(x, "b c (b1 h) (b2 w) -> (b b1 b2) c h w", b1=bs, b2=bs)        # (b·K·K, c, Hp, Wp)
        *_, h, w = x.shape
        pos_emb = rearrange(self.pos_emb[:h * w], "(h w) -> () () h w", h=h, w=w)    # (1, 1, Hp, Wp)
        x = x + pos_emb
        x = self.attn(x) + x
        x = self.ff(x) + x
        merge = "(b1 b2 b) c h w -> b c (b1 h) (b2 w)" if self.bug == "blocks-merged-batch-last" \
            else "(b b1 b2) c h w -> b c (b1 h) (b2 w)"
        x = rearrange(x, merge, b1=bs, b2=bs)                                        # (b, c, K·Hp, K·Wp)
        return self.aggregate(x)                                                     # (b, 2c, ., .)


BUGS = ("blocks-merged-batch-last", "heads-merged-d-major")
TWINS = ()
DIMS = ("B=2 D=32 H=4 K=3 Hp=5 Wp=7",)
EQUAL = {"B=2 D=32 H=4 K=3 Hp=5 Wp=7": "B=4 D=32 H=4 K=2 Hp=2 Wp=2"}


def build(bug="", B=2, D=32, H=4, K=3, Hp=5, Wp=7):
    torch.manual_seed(0)
    return NesTLevel(D, H, K, Hp * Wp, bug).eval(), (torch.randn(B, D, K * Hp, K * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
