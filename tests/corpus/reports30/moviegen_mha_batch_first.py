"""kyegomez/movie-gen issue #8 ("[BUG] pytorch nn.MultiheadAttention related shape bug": "nn.MultiheadAttention
uses batch_first=False as default, in your code i think you are intended it to be batch first"): the
repository's transformer blocks build ``nn.MultiheadAttention(dim, heads)`` and call it on batch-first
``(batch, tokens, dim)`` tensors, so the module reads the batch as the sequence and the tokens as the batch:
each token attends to the same token of the other clips in the batch, never to the other tokens of its own.

The idiom (a pre-norm block of a video diffusion transformer; the block here is written generically, after
the pattern the issue names): patch tokens ``(B, N, D)``, ``LayerNorm``, ``nn.MultiheadAttention`` called
``attn(h, h, h)[0]`` with a residual, then ``LayerNorm`` and a GELU MLP with its residual; no mask.

Bug (argument): ``sequence-first-default``: the module built without ``batch_first=True``."""

import sys

import torch
from torch import nn

BUGS = ("sequence-first-default",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class TransformerBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        if bug == "sequence-first-default":
            self.attn = nn.MultiheadAttention(dim, heads)
        else:
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):                                                      # (B, N, D)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]                      # (B, N, D)
        return x + self.mlp(self.norm2(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return TransformerBlock(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
