"""10-zin/Synthesizer (PyTorch port of Tay et al. 2020), synthesizer/modules.py (``DenseAttention``,
``RandomAttention``; commit of 2020): no query-key product; the dense variant's weights come from a two-layer
projection of each token, ``B = w2(relu(w1(x)))`` of width ``max_len`` cut to ``[:, :, :T]``, one table per head
(``(B, T, H, max_len)`` permuted to ``(B, H, T, T)``); the random variant's a learnt ``(H, max_len, max_len)``
table cut to ``[:, :T, :T]``; ``softmax(dim=-1)`` over the keys; ``@ v``; heads merged by ``transpose(1, 2)``.

Bugs (argument): ``dense-softmax-over-queries``: ``softmax(dim=-2)`` (the synthesized ``[T, T]`` table is not
a product, so which of its axes are the keys is a reading of the code; ports that transpose the table once
normalise the wrong one); ``merge-without-transpose``: ``out.reshape(B, T, D)`` on ``(B, H, T, d)``."""

import sys

import torch
from torch import nn
from torch.nn import functional as F


class DenseSynthesizer(nn.Module):
    def __init__(self, dim, heads, max_len, bug=""):
        super().__init__()
        self.h, self.max_len, self.bug = heads, max_len, bug
        self.w1 = nn.Linear(dim, dim)
        self.w2 = nn.Linear(dim, heads * max_len)
        self.value = nn.Linear(dim, dim)
        self.random = nn.Parameter(torch.randn(heads, max_len, max_len))
        self.out = nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, T, D)
        B, T, D = x.shape
        dense = self.w2(F.relu(self.w1(x))).view(B, T, self.h, self.max_len)         # (B, T, H, L)
        dense = dense[..., :T].permute(0, 2, 1, 3)                                   # (B, H, T, T)
        rand = self.random[:, :T, :T].unsqueeze(0)                                   # (1, H, T, T)
        attn = F.softmax(dense, dim=-2 if self.bug == "dense-softmax-over-queries" else -1)
        attn = 0.5 * attn + 0.5 * F.softmax(rand, dim=-1)
        v = self.value(x).view(B, T, self.h, D // self.h).transpose(1, 2)           # (B, H, T, d)
        out = attn @ v
        if self.bug == "merge-without-transpose":
            out = out.reshape(B, T, D)
        else:
            out = out.transpose(1, 2).reshape(B, T, D)
        return self.out(out)


BUGS = ("dense-softmax-over-queries", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return DenseSynthesizer(D, H, 16, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
