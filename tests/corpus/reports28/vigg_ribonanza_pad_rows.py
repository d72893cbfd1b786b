"""autosome-ru/vigg_ribonanza issue #1 ("Bug report: Masking not converted to 2d"): ``train_uni_adjnet.py``'s
``MultiHeadSelfAttention`` zeroed the softmaxed weights with the 1-D sequence mask broadcast over the keys,
``attention * mask.view(b, 1, 1, -1)``: the padded positions' own query rows keep attending (their outputs are
weighted sums of real tokens and flow on through the residual), and the reporter's fix builds the 2-D pair mask
``(mask.unsqueeze(1) & mask.unsqueeze(2)).unsqueeze(1).repeat(1, num_heads, 1, 1)`` so a pair is kept only when
both its query and its key are real.

The idiom: one ``weights`` parameter ``(hidden, 3*hidden)`` and ``in_bias``, ``x.view(b, l, num_heads,
-1).permute(0, 2, 1, 3).chunk(3, dim=3)`` into Q, K, V, ``Q @ K.transpose(2, 3) / temperature / norm``, the
pair features (the BPP adjacency, ``log(adj + 1e-5)``, through a Conv2d to one map per head) added with a per-head
``gamma``, softmax, the post-softmax multiplicative mask, ``permute(0, 2, 1, 3).flatten(2, 3)`` and ``out_bias``.

Bugs: ``key-mask-only`` (the code reported): the 1-D mask on the keys, multiplied into the weights after the
softmax; ``pair-mask-after-softmax`` (the reporter's fix): the 2-D pair mask, still after the softmax. Both leave
the real rows' weights summing to less than one (the pads took their share in the softmax) and ``attention``
returned unnormalised. The correct twin hides the padded keys before the softmax (``masked_fill`` with the
dtype's minimum) and zeroes the padded query rows after it (``mask.view(b, 1, -1, 1)``: the rows the report's
pair mask adds; its key half would hide nothing more there)."""

import sys

import torch
from torch import nn

BUGS = ("key-mask-only", "pair-mask-after-softmax")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.hidden_dim, self.num_heads = hidden_dim, num_heads
        self.head_size = hidden_dim // num_heads
        self.temperature = 1.0
        self.weights = nn.Parameter(torch.empty(hidden_dim, 3 * hidden_dim))
        self.in_bias = nn.Parameter(torch.zeros(1, 1, 3 * hidden_dim))
        self.out_bias = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        nn.init.xavier_normal_(self.weights)
        self.gamma = nn.Parameter(torch.ones(num_heads).view(1, -1, 1, 1))

    def forward(self, x, adj, mask):
        b, L, h = x.shape
        x = x @ self.weights + self.in_bias                                 # b, l, 3*hidden
        Q, K, V = x.view(b, L, self.num_heads, -1).permute(0, 2, 1, 3).chunk(3, dim=3)
        norm = self.head_size ** 0.5
        attention = Q @ K.transpose(2, 3) / self.temperature / norm
        attention = attention + self.gamma * adj
        mask2d = (mask.unsqueeze(1) & mask.unsqueeze(2)).unsqueeze(1).repeat(1, self.num_heads, 1, 1)
        if not self.bug:                                                    # the keys hidden before the softmax
            attention = attention.masked_fill(~mask.view(b, 1, 1, -1), torch.finfo(attention.dtype).min)
        attention = attention.softmax(dim=-1)                               # b, a, l, l
        if self.bug == "key-mask-only":
            attention = attention * mask.view(b, 1, 1, -1)
        elif self.bug == "pair-mask-after-softmax":
            attention = attention * mask2d
        else:
            attention = attention * mask.view(b, 1, -1, 1)                  # the padded query rows zeroed
        out = attention @ V                                                 # b, a, l, head
        out = out.permute(0, 2, 1, 3).flatten(2, 3)
        return out + self.out_bias


class AdjEncoderLayer(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.conv = nn.Conv2d(1, num_heads, kernel_size=3, padding="same", bias=False)
        self.in_norm = nn.LayerNorm(dim)
        self.mhsa = MultiHeadSelfAttention(dim, num_heads, bug)

    def forward(self, x, adj, mask):
        adj = self.conv(torch.log(adj + 1e-5).unsqueeze(1))                 # B H S S
        return self.mhsa(self.in_norm(x), adj=adj, mask=mask) + x


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1:, T - 2:] = False
    adj = torch.rand(B, T, T)
    return AdjEncoderLayer(D, H, bug).eval(), (torch.randn(B, T, D), adj, mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
