"""kyegomez/MegaVIT issue #17 ("[BUG] QK norm seems not correct", closed; wzm2256: "It seems you normalized k
and v instead of q and v in https://github.com/kyegomez/MegaVIT/blob/main/mega_vit/main.py line 92. I think
this is an error."): the ViT-22B-style attention meant to layer-normalise the queries and the keys per head
before their product (QK normalisation), but the code normalised the keys and the *values*: the queries
entered the product raw and the values were normalised.

The idiom: MegaVIT's ``Attention`` (``to_qkv`` without bias chunked in three, heads by einops-style
``b n (h d) -> b h n d`` written as ``view``/``transpose``, ``nn.LayerNorm(dim_head)`` for the queries and the
keys, ``scale = dim_head ** -0.5``, softmax, ``to_out``), one pre-norm block over patch tokens.

Bug (which operand): ``norm-k-and-v``: the norms on k and v, q left raw."""

import sys

import torch
from torch import nn

BUGS = ("norm-k-and-v",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64, bug=""):
        super().__init__()
        self.bug = bug
        inner_dim = dim_head * heads
        self.heads, self.scale = heads, dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.q_norm, self.k_norm = nn.LayerNorm(dim_head), nn.LayerNorm(dim_head)
        self.attend = nn.Softmax(dim=-1)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in qkv)          # (b, h, n, d)
        if self.bug == "norm-k-and-v":
            k, v = self.q_norm(k), self.k_norm(v)
        else:
            q, k = self.q_norm(q), self.k_norm(k)
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        attn = self.attend(dots)
        out = torch.matmul(attn, v)                                                     # (b, h, n, d)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, heads=H, dim_head=D // H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
