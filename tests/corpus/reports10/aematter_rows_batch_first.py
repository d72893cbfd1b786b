"""aipixel/AEMatter issue #3 ("Possible issue with Multihead attention inputs"; the author: "there is indeed a
bug with the implementation here. I need to retrain the model"): ``AEALblock`` cut a feature map into bands of
rows, ``rearrange(x, 'b c (h1 h2) w -> (b h1) (h2 w) c')``, batch first, and handed them to an
``nn.MultiheadAttention`` built with the default ``batch_first=False``: the module read ``(b h1)`` as the
sequence and ``(h2 w)`` as the batch, so attention ran across the images of the batch and the bands, each
pixel of a band attending to the same pixel of the other bands and images.

The idiom: a conv feature map ``[B, C, H_img, W]``, half its channels cut into bands of ``width`` rows, the
other half into bands of ``width`` columns, ``nn.MultiheadAttention(c // 2, heads)``, a residual, and
``rearrange`` back; B images of ``2 D`` channels and ``T / 2 x T / 2`` pixels, bands of 2 rows or columns
(T pixels per band), D channels to each attention.

Bug (argument): ``sequence-first-module``: the batch-first bands passed to the sequence-first module."""

import sys

import torch
from einops import rearrange
from torch import nn

BUGS = ("sequence-first-module",)
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)


class AEALblock(nn.Module):
    def __init__(self, dim, heads, width=2, bug=""):
        super().__init__()
        self.width, self.bug = width, bug
        self.attn_rows = nn.MultiheadAttention(dim, heads, batch_first=bug != "sequence-first-module")
        self.attn_cols = nn.MultiheadAttention(dim, heads, batch_first=bug != "sequence-first-module")
        self.norm = nn.LayerNorm(2 * dim)

    def forward(self, src):                                                            # (B, C, Hi, W)
        b, c, h, w = src.shape
        x1 = rearrange(src[:, : c // 2], "b c (h1 h2) w -> (b h1) (h2 w) c", h2=self.width)
        x2 = rearrange(src[:, c // 2:], "b c h (w1 w2) -> (b w1) (h w2) c", w2=self.width)
        x1 = x1 + self.attn_rows(x1, x1, x1, need_weights=False)[0]
        x2 = x2 + self.attn_cols(x2, x2, x2, need_weights=False)[0]
        x1 = rearrange(x1, "(b h1) (h2 w) c -> b c (h1 h2) w", b=b, h2=self.width)
        x2 = rearrange(x2, "(b w1) (h w2) c -> b c h (w1 w2)", b=b, w2=self.width)
        out = torch.cat([x1, x2], dim=1)                                               # (B, C, Hi, W)
        return self.norm(out.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    return AEALblock(D, H, bug=bug).eval(), (torch.randn(B, 2 * D, T // 2, T // 2),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
