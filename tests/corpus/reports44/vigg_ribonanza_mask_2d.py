"""autosome-ru/vigg_ribonanza issue #1 ("Bug report: Masking not converted to 2d", open): in
``python_scripts/train_uni_adjnet.py`` ``MultiHeadSelfAttention.forward`` multiplies the softmaxed attention by the
padding mask as ``attention*mask.view(b,1,1,-1)``, the 1-d mask broadcast over the keys only, where, the report
says, it "should be converted to 2d mask instead of duplicating of 1d mask": ``mask2d = (mask.unsqueeze(1) &
mask.unsqueeze(2)).unsqueeze(1).repeat(1, self.num_heads, 1, 1)``, ``attention = attention*mask2d`` (the pad
queries' rows zeroed too). The 1-d form already keeps every real token from reading a pad (the pads' columns are
zero); it leaves the pad rows attending the real tokens. Both forms multiply after the softmax, so each real
token's weights sum to less than one (the share the softmax gave the pads is dropped, not handed back); the
correct code here hides the pad keys before the softmax (``masked_fill(~mask.view(b,1,1,-1), -inf)``) and zeroes
the pad rows after it (the 2-d mask the report asks for, with every real row still a softmax).

The idiom (the RNAdjNet encoder layer, VIGG's Ribonanza solution): one fused ``weights`` parameter ``(hidden,
3*hidden)`` and ``in_bias``, ``x.view(b, l, self.num_heads, -1).permute(0,2,1,3).chunk(3, dim=3)`` (each head's
q|k|v slices side by side), ``Q @ K.transpose(2,3)/self.temperature/norm`` with ``norm = head_size**0.5``, the
base-pair-probability matrix added as a per-head bias (``self.gamma * adj``, ``adj`` = ``log(bpp + 1e-5)``
``(B, 1, L, L)``), ``softmax(dim=-1)``, the mask multiplied after the softmax, ``attention @ V``,
``permute(0,2,1,3).flatten(2,3)``, ``out_bias``; pre-norm residual and FFN. The first sequence right-padded by two.

Bugs: ``mask-keys-only``: ``attention*mask.view(b,1,1,-1)`` (the code issue #1 reports); ``mask2d-after-softmax``:
the issue's own fix, the 2-d mask multiplied after the softmax; ``mask-queries-only``:
``attention*mask.view(b,1,-1,1)`` (the mask broadcast over the queries: every real token reads the pads)."""

import sys

import torch
from torch import nn

BUGS = ("mask-keys-only", "mask2d-after-softmax", "mask-queries-only")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads=None, temperature=1, bug=""):
        super().__init__()
        self.hidden_dim, self.num_heads, self.temperature, self.bug = hidden_dim, num_heads or 1, temperature, bug
        self.head_size = hidden_dim // self.num_heads
        self.weights = nn.Parameter(torch.empty(self.hidden_dim, 3 * self.hidden_dim))   # Q, K, V of equal sizes
        self.out_bias = nn.Parameter(torch.zeros(1, 1, self.hidden_dim))
        self.in_bias = nn.Parameter(torch.zeros(1, 1, 3 * self.hidden_dim))
        torch.nn.init.xavier_normal_(self.weights)
        self.gamma = nn.Parameter(torch.ones(self.num_heads).view(1, -1, 1, 1))

    def forward(self, x, adj, mask=None):
        b, l, h = x.shape  # noqa: E741
        x = x @ self.weights + self.in_bias                                                 # b, l, 3*hidden
        Q, K, V = x.view(b, l, self.num_heads, -1).permute(0, 2, 1, 3).chunk(3, dim=3)      # b, a, l, head
        norm = self.head_size**0.5
        attention = (Q @ K.transpose(2, 3) / self.temperature / norm)                       # b, a, l, l
        attention = attention + self.gamma * adj
        if mask is not None and self.bug not in BUGS:
            attention = attention.masked_fill(~mask.view(b, 1, 1, -1), float("-inf"))      # pad keys hidden
        attention = attention.softmax(dim=-1)                                               # b, a, l, l
        if mask is not None:
            if self.bug == "mask-keys-only":
                attention = attention * mask.view(b, 1, 1, -1)
            elif self.bug == "mask-queries-only":
                attention = attention * mask.view(b, 1, -1, 1)
            elif self.bug == "mask2d-after-softmax":
                mask2d = (mask.unsqueeze(1) & mask.unsqueeze(2)).unsqueeze(1).repeat(1, self.num_heads, 1, 1)
                attention = attention * mask2d                                              # b, a, l, l
            else:
                attention = attention * mask.view(b, 1, -1, 1)                              # pad rows zeroed
        out = attention @ V                                                                 # b, a, l, head
        out = out.permute(0, 2, 1, 3).flatten(2, 3)                                         # b, l, hidden
        return out + self.out_bias


class TransformerEncoderLayer(nn.Module):
    def __init__(self, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.in_norm = nn.LayerNorm(hidden_dim)
        self.mhsa = MultiHeadSelfAttention(hidden_dim, num_heads, bug=bug)
        self.ffn = nn.Sequential(nn.LayerNorm(hidden_dim), nn.Linear(hidden_dim, 4 * hidden_dim), nn.GELU(),
                                 nn.Linear(4 * hidden_dim, hidden_dim))

    def forward(self, x, adj, mask=None):
        x = self.mhsa(self.in_norm(x), adj=adj, mask=mask) + x
        return self.ffn(x) + x


class RNAdjNet(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.emb = nn.Embedding(4 + 3, dim)                                                 # 4 nucleotides + 3 tokens
        self.layer = TransformerEncoderLayer(dim, heads, bug=bug)
        self.proj_out = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 2))

    def forward(self, seq_int, bpp, mask):
        adj = torch.log(bpp + 1e-5).unsqueeze(1)                                            # B 1 S S
        x = self.layer(self.emb(seq_int), adj=adj, mask=mask)
        return self.proj_out(x)


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[0, -2:] = False                                                                    # right padding
    seq_int = torch.randint(0, 4, (B, T)).masked_fill(~mask, 6)
    bpp = torch.rand(B, T, T) * (mask[:, :, None] & mask[:, None, :])
    return RNAdjNet(D, H, bug=bug).eval(), (seq_int, bpp, mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
