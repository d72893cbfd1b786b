"""rish-16/tokenlearner-pytorch issue #1 ("y = y.view(8, 512, 3) is wrong"; the author: "Thanks for the catch!
Fixing in the next patch"): the README fed the learned tokens of a ``TokenLearner``, ``y`` of shape ``[512, 8,
3]`` (batch, tokens, channels), to a sequence-first ``nn.MultiheadAttention`` with ``y = y.view(8, 512, 3)``,
then read the result back with ``y.view(512, 8, 3)``. A view keeps the memory order, so the "sequence" rows were
slices of the flattened batch, not the tokens of one image; the reporter's fix is ``y.transpose(0, 1)``.

The idiom (ported to torch): patch features ``(B, T, D)``, a ``TokenLearner`` that computes S spatial attention
maps over the T patches (``Linear(D, S)``, softmax over the patches) and pools S learned tokens ``(B, S, D)``,
then ``nn.MultiheadAttention(D, H)`` (``batch_first=False``) over the S tokens, a residual and ``LayerNorm``.

Bug (argument): ``view-for-transpose``: ``view(S, B, D)`` into the sequence-first module and ``view(B, S, D)``
out of it, in place of ``transpose(0, 1)``."""

import sys

import torch
from torch import nn

BUGS = ("view-for-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=5",)


class TokenLearner(nn.Module):
    def __init__(self, dim, num_tokens):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn_maps = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, num_tokens))

    def forward(self, x):
        maps = self.attn_maps(self.norm(x)).softmax(dim=1)                             # (B, T, S)
        return torch.einsum("bts,btd->bsd", maps, x)                                    # (B, S, D)


class TokenLearnerBlock(nn.Module):
    def __init__(self, dim, heads, num_tokens, bug=""):
        super().__init__()
        self.bug = bug
        self.tklr = TokenLearner(dim, num_tokens)
        self.mhsa = nn.MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        y = self.tklr(x)                                                                # (B, S, D)
        b, s, d = y.shape
        if self.bug == "view-for-transpose":
            z = y.view(s, b, d)                                                         # (S, B, D)
        else:
            z = y.transpose(0, 1)                                                       # (S, B, D)
        z, _ = self.mhsa(z, z, z, need_weights=False)                                   # (S, B, D)
        if self.bug == "view-for-transpose":
            z = z.view(b, s, d)                                                         # (B, S, D)
        else:
            z = z.transpose(0, 1)                                                       # (B, S, D)
        return self.norm(y + z)


def build(bug="", B=2, T=6, D=32, H=4, S=5):
    torch.manual_seed(0)
    return TokenLearnerBlock(D, H, S, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
