"""karpathy/minGPT, mingpt/model.py (``CausalSelfAttention``, 2020-2022; nanoGPT's ``model.py`` keeps the same
slow path): one ``c_attn`` linear to ``3 * n_embd`` split ``split(self.n_embd, dim=2)``; each of q, k, v
``view(B, T, n_head, C // n_head).transpose(1, 2)``; ``att = (q @ k.transpose(-2, -1)) * (1.0 /
math.sqrt(k.size(-1)))``; the causal mask a registered buffer ``torch.tril(torch.ones(block_size, block_size))
.view(1, 1, block_size, block_size)`` sliced ``self.bias[:, :, :T, :T]`` and applied ``att.masked_fill(... == 0,
float('-inf'))``; softmax; ``y = att @ v``; ``y.transpose(1, 2).contiguous().view(B, T, C)``; ``c_proj``. The
block is longer than the text (``block_size`` 16 here, T 6), as when a GPT samples a short prompt.

Bugs: ``bias-rows-from-end``: the buffer sliced ``self.bias[:, :, -T:, :T]`` (the rows taken from the end of the
block, the columns from its start: row i of the slice is the block's row ``block_size - T + i``, so every token
attends all T tokens, the future included, whenever the block is longer than the text);
``merge-reshape-no-transpose``: ``y.reshape(B, T, C)`` with the ``transpose(1, 2)`` dropped (the ``.contiguous()``
error goes away with ``reshape``; heads and tokens are mixed in the merged rows)."""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, bug=""):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug

    def forward(self, x):
        B, T, C = x.size()                                                           # (B, T, C)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                           # 3 x (B, T, C)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)              # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)              # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)              # (B, nh, T, hs)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))              # (B, nh, T, T)
        if self.bug == "bias-rows-from-end":
            mask = self.bias[:, :, -T:, :T]                                          # (1, 1, T, T)
        else:
            mask = self.bias[:, :, :T, :T]                                           # (1, 1, T, T)
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v                                                                  # (B, nh, T, hs)
        if self.bug == "merge-reshape-no-transpose":
            y = y.reshape(B, T, C)                                                   # (B, T, C)
        else:
            y = y.transpose(1, 2).contiguous().view(B, T, C)                         # (B, T, C)
        return self.c_proj(y)


BUGS = ("bias-rows-from-end", "merge-reshape-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CausalSelfAttention(D, H, block_size=16, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
