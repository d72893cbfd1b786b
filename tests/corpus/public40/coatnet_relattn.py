"""chinhsuanwu/coatnet-pytorch, coatnet.py (``Attention`` and ``Transformer``, master): CoAtNet's relative
attention over an image's ``ih x iw`` pixels: a learned ``relative_bias_table`` of ``(2ih-1)(2iw-1) x heads``,
its ``relative_index`` buffer built from ``torch.meshgrid`` coordinates (``coords[:, :, None] - coords[:, None,
:]``, shifted and flattened with ``* (2 * iw - 1)``), gathered with ``relative_index.repeat(1, heads)`` and
``rearrange(..., '(h w) c -> 1 c h w', h=ih*iw, w=ih*iw)``, ``to_qkv(x).chunk(3, dim=-1)`` split into heads by
``rearrange(t, 'b n (h d) -> b h n d')``, ``matmul(q, k.transpose(-1, -2)) * scale`` plus the bias, softmax,
``rearrange(out, 'b h n d -> b n (h d)')``, ``to_out``; the ``Transformer`` block reads the image
``'b c ih iw -> b (ih iw) c'`` with a pre-norm and writes it back.

Bugs: ``softmax-over-queries``: ``nn.Softmax(dim=-2)`` (the normalisation over the queries, a slip of the kind
reported in several ViT ports); ``bias-key-query-swapped``: the bias rearranged ``'(h w) c -> 1 c w h'`` (the
relative bias transposed: query ``i`` gets key ``j``'s offset reversed, a value-level slip on a square table
whose two axes are both the pixels: kept as a twin, since no name or contract tells a relative table's direction
from its shape)."""

import sys

import torch
from einops import rearrange
from einops.layers.torch import Rearrange
from torch import nn


class Attention(nn.Module):
    def __init__(self, inp, oup, image_size, heads=8, dim_head=32, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.ih, self.iw = image_size
        self.heads, self.bug = heads, bug
        self.scale = dim_head ** -0.5
        self.relative_bias_table = nn.Parameter(torch.randn((2 * self.ih - 1) * (2 * self.iw - 1), heads) * 0.02)
        coords = torch.meshgrid((torch.arange(self.ih), torch.arange(self.iw)), indexing="ij")
        coords = torch.flatten(torch.stack(coords), 1)
        relative_coords = coords[:, :, None] - coords[:, None, :]
        relative_coords[0] += self.ih - 1
        relative_coords[1] += self.iw - 1
        relative_coords[0] *= 2 * self.iw - 1
        relative_coords = rearrange(relative_coords, "c h w -> h w c")
        relative_index = relative_coords.sum(-1).flatten().unsqueeze(1)
        self.register_buffer("relative_index", relative_index)
        self.attend = nn.Softmax(dim=-2 if bug == "softmax-over-queries" else -1)
        self.to_qkv = nn.Linear(inp, inner_dim * 3, bias=False)
        self.to_out = nn.Linear(inner_dim, oup)

    def forward(self, x):
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in qkv)
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        relative_bias = self.relative_bias_table.gather(0, self.relative_index.repeat(1, self.heads))
        pattern = "(h w) c -> 1 c w h" if self.bug == "bias-key-query-swapped" else "(h w) c -> 1 c h w"
        relative_bias = rearrange(relative_bias, pattern, h=self.ih * self.iw, w=self.ih * self.iw)
        dots = dots + relative_bias
        attn = self.attend(dots)
        out = torch.matmul(attn, v)
        out = rearrange(out, "b h n d -> b n (h d)")
        return self.to_out(out)


class Transformer(nn.Module):
    def __init__(self, inp, image_size, heads, dim_head, bug=""):
        super().__init__()
        ih, iw = image_size
        self.attn = Attention(inp, inp, image_size, heads, dim_head, bug)
        self.norm = nn.LayerNorm(inp)
        self.to_tokens = Rearrange("b c ih iw -> b (ih iw) c")
        self.to_image = Rearrange("b (ih iw) c -> b c ih iw", ih=ih, iw=iw)

    def forward(self, x):
        return x + self.to_image(self.attn(self.norm(self.to_tokens(x))))


BUGS = ("softmax-over-queries",)
TWINS = ("bias-key-query-swapped",)
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    model = Transformer(D, (Hp, Wp), heads=H, dim_head=D // H, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
