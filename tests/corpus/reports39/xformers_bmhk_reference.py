"""facebookresearch/xformers issue #761 ("document of memory_efficient_attention is wrong"; a maintainer: "This is
indeed correct, the 'equivalent pytorch code' assumes a single head"; again issue #932): the reference code in
``memory_efficient_attention``'s docstring, ``attn = query @ key.transpose(-2, -1)``, is written for ``[B, M, K]``,
but the op takes ``[B, M, H, K]`` (BMHK). Run on BMHK tensors, as the reporter did to check the kernel, it scores
every token's heads against each other (``[B, M, H, H]``) instead of the tokens, and returns a tensor of the right
shape. The fix moves the heads out first: ``query.transpose(1, 2)`` (BHMK), the same for key and value, and the
output transposed back.

The idiom (the docstring's "equivalent pytorch code" used as the attention of a ViT-style block, ported as is):
``qkv`` projected and viewed ``[B, M, 3, H, K]`` and unbound into BMHK ``q``/``k``/``v``; ``query = query *
scale``, ``attn = query @ key.transpose(-2, -1)``, ``attn.softmax(-1)``, ``attn @ value``; the BMHK output
reshaped ``[B, M, H * K]`` and projected; pre-norm residual block.

Bug (argument): ``bmhk-reference``: the reference run on the BMHK tensors without the transposes."""

import sys

import torch
from torch import nn

BUGS = ("bmhk-reference",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def reference_attention(query, key, value, bug=""):
    scale = 1.0 / query.shape[-1] ** 0.5
    if bug != "bmhk-reference":
        query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)   # (B, H, T, d)
    query = query * scale
    attn = query @ key.transpose(-2, -1)
    attn = attn.softmax(-1)
    out = attn @ value
    if bug != "bmhk-reference":
        out = out.transpose(1, 2)                                                        # (B, T, H, d)
    return out


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, m, c = x.shape
        qkv = self.qkv(x).reshape(b, m, 3, self.heads, c // self.heads)                 # (B, T, 3, H, d)
        q, k, v = qkv.unbind(2)                                                          # (B, T, H, d)
        out = reference_attention(q, k, v, self.bug)                                     # (B, T, H, d)
        return self.proj(out.reshape(b, m, c))                                           # (B, T, D)


class Block(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Block(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
