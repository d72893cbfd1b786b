"""whai362/PVT, classification/pvt.py (``Attention`` with ``sr_ratio``; https://github.com/whai362/PVT):
queries ``self.q(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)``; keys and
values from a spatially reduced grid: ``x_ = x.permute(0, 2, 1).reshape(B, C, H, W)``, ``x_ =
self.sr(x_).reshape(B, C, -1).permute(0, 2, 1)`` (a ``Conv2d(dim, dim, sr_ratio, stride=sr_ratio)``),
``self.norm(x_)``, then ``self.kv(x_).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0,
3, 1, 4)``; ``attn = (q @ k.transpose(-2, -1)) * self.scale``; ``softmax(dim=-1)``; the merge ``(attn @
v).transpose(1, 2).reshape(B, N, C)``.

Bugs (argument): ``grid-no-permute``: ``x.reshape(B, C, H, W)`` without ``permute(0, 2, 1)``: the
token-major rows read as channel planes (the slip PVT's own ``permute`` exists to avoid);
``sr-no-permute``: the reduced grid ``self.sr(x_).reshape(B, -1, C)`` without ``permute(0, 2, 1)``:
channel planes read as tokens.

Twin (argument): ``kv-heads-first``: ``reshape(B, -1, self.num_heads, 2, C // self.num_heads).permute(3, 0, 2,
1, 4)``: the fused ``2·C`` width cut as (heads, k/v). Against PVT's checkpoint each "key" head would hold half
of a key head and half of a value head; on the weights the model is built with, it is GPT-NeoX's per-head
fused layout (``view(B, T, H, 3·d_k)``, correct there): any order of a projection's rows is another
projection, and which order a checkpoint was trained in is nowhere in what torch records. (A bug until the
reduced grid was named, 0d8326e's successor: it was ``?`` only because the keys had no names.)"""

import sys

import torch
from torch import nn

BUGS = ("grid-no-permute", "sr-no-permute")
TWINS = ("kv-heads-first",)
DIMS = ("B=2 T=24 Hp=6 Wp=4 D=32 H=4",)
#: B = H = 4 and a 4 x 4 grid (T = 16) reduced to 2 x 2 = 4 keys: batch, heads and keys all 4
EQUAL = {"B=2 T=24 Hp=6 Wp=4 D=32 H=4": "B=4 T=16 Hp=4 Wp=4 D=32 H=4"}


class Attention(nn.Module):
    def __init__(self, dim=32, num_heads=4, sr_ratio=2, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, dim * 2)
        self.proj = nn.Linear(dim, dim)
        self.sr_ratio = sr_ratio
        self.sr = nn.Conv2d(dim, dim, kernel_size=sr_ratio, stride=sr_ratio)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, H, W):  # noqa: N803
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)  # (B, h, N, d_k)
        if self.bug == "grid-no-permute":
            x_ = x.reshape(B, C, H, W)  # bug: token-major rows read as channel planes
        else:
            x_ = x.permute(0, 2, 1).reshape(B, C, H, W)  # (B, C, Hp, Wp)
        if self.bug == "sr-no-permute":
            x_ = self.sr(x_).reshape(B, -1, C)  # bug: channel planes read as tokens
        else:
            x_ = self.sr(x_).reshape(B, C, -1).permute(0, 2, 1)  # (B, S, C)
        x_ = self.norm(x_)
        if self.bug == "kv-heads-first":
            kv = self.kv(x_).reshape(B, -1, self.num_heads, 2, C // self.num_heads).permute(3, 0, 2, 1, 4)
        else:
            kv = self.kv(x_).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]  # (B, h, S, d_k)
        attn = (q @ k.transpose(-2, -1)) * self.scale  # (B, h, N, S)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)  # (B, N, C)
        return self.proj(x)


def build(bug="", B=2, Hp=6, Wp=4, D=32, H=4):  # noqa: N803
    """--dims 'B=2 T=24 Hp=6 Wp=4 D=32 H=4': patch tokens (B, T = Hp·Wp, D) and the grid's sides."""
    torch.manual_seed(0)
    model = Attention(D, H, 2, bug).eval()
    return (lambda x: model(x, Hp, Wp)), (torch.randn(B, Hp * Wp, D),)


if __name__ == "__main__":
    forward, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        forward(*inputs)
