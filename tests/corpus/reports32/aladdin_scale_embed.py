"""aladdinpersson/Machine-Learning-Collection issue #65 ("attention = torch.softmax(energy / (self.embed_size **
(1 / 2)), dim=3)", "should be ... self.head_dim ** (1 / 2)"): the from-scratch transformer's ``SelfAttention``
scales the einsum scores by the square root of the *model* width, ``embed_size``, where scaled dot-product
attention divides by the square root of the width the dot product runs over, ``head_dim`` (for embed 256 and 8
heads 1/16 against 1/sqrt(32): the softmax is 2.8 times flatter than the paper's).

The idiom (the tutorial's ``transformer_from_scratch.py``): values, keys and queries reshaped to
``(N, len, heads, head_dim)`` and projected per head by ``nn.Linear(embed_size, embed_size)``, scores by
``einsum("nqhd,nkhd->nhqk")``, ``masked_fill(mask == 0, -1e20)`` with a ``(N, 1, 1, len)`` padding mask, the
softmax over ``dim=3``, ``einsum("nhql,nlhd->nqhd")`` and a reshape back to ``(N, query_len, heads * head_dim)``,
``fc_out``; the block adds the residual, ``LayerNorm``, the feed-forward and a second norm. The source has
padding at its end (the second sentence is shorter).

Bug (scale): ``scale-by-embed``."""

import sys

import torch
from torch import nn

BUGS = ("scale-by-embed",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
PAD = 0


class SelfAttention(nn.Module):
    def __init__(self, embed_size, heads, bug=""):
        super().__init__()
        self.bug, self.embed_size, self.heads = bug, embed_size, heads
        self.head_dim = embed_size // heads
        self.values = nn.Linear(embed_size, embed_size)
        self.keys = nn.Linear(embed_size, embed_size)
        self.queries = nn.Linear(embed_size, embed_size)
        self.fc_out = nn.Linear(embed_size, embed_size)

    def forward(self, values, keys, query, mask):
        N = query.shape[0]
        value_len, key_len, query_len = values.shape[1], keys.shape[1], query.shape[1]
        values = self.values(values).reshape(N, value_len, self.heads, self.head_dim)   # (N, S, h, d)
        keys = self.keys(keys).reshape(N, key_len, self.heads, self.head_dim)           # (N, S, h, d)
        queries = self.queries(query).reshape(N, query_len, self.heads, self.head_dim)  # (N, T, h, d)
        energy = torch.einsum("nqhd,nkhd->nhqk", [queries, keys])                      # (N, h, T, S)
        energy = energy.masked_fill(mask == 0, float("-1e20"))
        width = self.embed_size if self.bug == "scale-by-embed" else self.head_dim
        attention = torch.softmax(energy / (width ** (1 / 2)), dim=3)
        out = torch.einsum("nhql,nlhd->nqhd", [attention, values])                      # (N, T, h, d)
        out = out.reshape(N, query_len, self.heads * self.head_dim)                      # (N, T, D)
        return self.fc_out(out)


class TransformerBlock(nn.Module):
    def __init__(self, embed_size, heads, bug=""):
        super().__init__()
        self.attention = SelfAttention(embed_size, heads, bug=bug)
        self.norm1 = nn.LayerNorm(embed_size)
        self.norm2 = nn.LayerNorm(embed_size)
        self.feed_forward = nn.Sequential(nn.Linear(embed_size, 4 * embed_size), nn.ReLU(),
                                          nn.Linear(4 * embed_size, embed_size))

    def forward(self, x, src):
        mask = (src != PAD).unsqueeze(1).unsqueeze(2)                                    # (N, 1, 1, S)
        x = self.norm1(self.attention(x, x, x, mask) + x)
        return self.norm2(self.feed_forward(x) + x)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    src = torch.randint(1, 50, (B, T))
    src[1:, T - 2:] = PAD
    return TransformerBlock(D, H, bug=bug).eval(), (torch.randn(B, T, D), src)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
