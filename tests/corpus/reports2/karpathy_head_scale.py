"""karpathy/ng-video-lecture PR #6 ("We should scale attention by head size", merged) and
Graylab/DL4Proteins-notebooks issue #12: ``gpt.py``'s ``Head`` scaled the scores by ``C**-0.5`` with C the
embedding width ``n_embd``, not the head's ``head_size``. Heads are separate modules (``key``, ``query``,
``value`` each ``Linear(n_embd, head_size, bias=False)``), a ``tril`` buffer cut ``[:T, :T]``,
``masked_fill(... == 0, -inf)``, ``softmax(dim=-1)``; ``MultiHeadAttention`` ``cat``s the heads' outputs on the
last axis and projects them.

Bug (argument): ``scale-n-embd``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("scale-n-embd",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
block_size = 8


class Head(nn.Module):
    def __init__(self, n_embd, head_size, bug=""):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.bug = bug

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)                                                      # (B, T, hs)
        q = self.query(x)                                                    # (B, T, hs)
        scale = C**-0.5 if self.bug == "scale-n-embd" else k.shape[-1]**-0.5
        wei = q @ k.transpose(-2, -1) * scale                                # (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        v = self.value(x)                                                    # (B, T, hs)
        return wei @ v                                                       # (B, T, hs)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, num_heads, bug=""):
        super().__init__()
        head_size = n_embd // num_heads
        self.heads = nn.ModuleList([Head(n_embd, head_size, bug) for _ in range(num_heads)])
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)                  # (B, T, H hs)
        return self.proj(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MultiHeadAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
