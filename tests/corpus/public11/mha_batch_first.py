"""pytorch/pytorch, torch/nn/modules/activation.py (``nn.MultiheadAttention``, ``batch_first=False`` by default:
inputs ``(L, N, E)``), used the way a text classifier's encoder block does (``self.attn(x, x, x,
need_weights=False)`` on a ``(B, T, D)`` batch, with a pre-norm and a residual).

Bugs (argument): ``default-batch-first``: the module made with the default ``batch_first=False`` and fed
``(B, T, D)`` (pytorch issues #25100 and #38084, "MultiheadAttention expects (L, N, E)"; the slip of every
tutorial port): the batch becomes the sequence and each token attends across the batch; with no padding mask it runs
at every size, silently. Twin: ``batch-first-false``: ``batch_first=False`` with the input transposed to
``(T, B, D)`` and back, the layout the module expects."""

import sys

import torch
from torch import nn


class EncoderBlock(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.bug = bug
        self.norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=bug == "")

    def forward(self, x):
        y = self.norm(x)                                                   # (B, T, D)
        if self.bug == "batch-first-false":
            y = y.transpose(0, 1)                                          # (T, B, D)
            y, _ = self.attn(y, y, y, need_weights=False)
            y = y.transpose(0, 1)                                          # (B, T, D)
        else:
            y, _ = self.attn(y, y, y, need_weights=False)
        return x + y


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return EncoderBlock(D, H, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("default-batch-first",)
TWINS = ("batch-first-false",)
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
