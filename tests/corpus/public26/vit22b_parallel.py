"""The ViT-22B paper's layer (Dehghani et al., "Scaling Vision Transformers to 22
Billion Parameters", arXiv:2302.05442, section 2, the parallel layer and QK normalisation), written in the idiom of
lucidrains-style PyTorch ports (no official PyTorch file is public; the paper's text is the source): one
``LayerNorm`` feeding both branches, ``y = x + MLP(LN(x)) + Attention(LN(x))``;
the attention's ``to_q``/``to_kv`` linears without bias, q, k and v split ``rearrange('b n (h d) -> b h n d')``;
``q_norm``/``k_norm``, a ``LayerNorm(dim_head)`` applied to each head's queries and keys before the dot product;
``einsum('b h i d, b h j d -> b h i j') * scale``, ``softmax(dim=-1)``, ``einsum('b h i j, b h j d -> b h i d')``,
``rearrange('b h n d -> b n (h d)')``, ``to_out``.

Bugs: ``qk-norm-over-tokens``: the q/k normalisation written by hand as ``(q - q.mean(dim=-2, keepdim=True)) /
q.std(dim=-2, keepdim=True)`` (over the tokens of each head, not within each head's vector: the axis slip of a
normalisation on a ``(b, h, n, d)`` tensor, the queries of one token now depend on every other token's);
``split-heads-by-reshape``: q, k and v split ``t.reshape(b, h, n, -1)`` (the ``rearrange`` replaced by a bare
reshape of ``(b, n, h*d)``, the slip of hand ports: each "head" now holds pieces of several tokens).

Twin (correct): ``merge-heads-d-major``: the heads merged ``rearrange('b h n d -> b n (d h)')`` (first written as a
bug; a fixed permutation of the features the learnt ``to_out`` reads, a twin as round 18 settled for Flamingo's
merge: each feature still holds one head's value)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class QKNorm(nn.Module):
    def __init__(self, dim_head, bug=""):
        super().__init__()
        self.bug = bug
        self.norm = nn.LayerNorm(dim_head, bias=False)

    def forward(self, t):                                                           # (b, h, n, d)
        if self.bug == "qk-norm-over-tokens":
            return (t - t.mean(dim=-2, keepdim=True)) / (t.std(dim=-2, keepdim=True) + 1e-5) * self.norm.weight
        return self.norm(t)


class ParallelBlock(nn.Module):
    def __init__(self, dim, heads, mlp_mult=4, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        dim_head = dim // heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.q_norm, self.k_norm = QKNorm(dim_head, bug), QKNorm(dim_head, bug)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_mult), nn.GELU(), nn.Linear(dim * mlp_mult, dim))

    def forward(self, x):                                                           # (b, n, dim)
        normed = self.norm(x)
        q = self.to_q(normed)
        k, v = self.to_kv(normed).chunk(2, dim=-1)
        if self.bug == "split-heads-by-reshape":
            q, k, v = (t.reshape(t.shape[0], self.heads, t.shape[1], -1) for t in (q, k, v))
        else:
            q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=self.heads) for t in (q, k, v))
        q, k = self.q_norm(q), self.k_norm(k)
        sim = einsum('b h i d, b h j d -> b h i j', q, k) * self.scale
        attn = sim.softmax(dim=-1)
        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        pattern = 'b h n d -> b n (d h)' if self.bug == "merge-heads-d-major" else 'b h n d -> b n (h d)'
        out = self.to_out(rearrange(out, pattern))
        return x + out + self.mlp(normed)


class ViT22BEncoder(nn.Module):
    def __init__(self, dim, heads, depth=2, bug=""):
        super().__init__()
        self.layers = nn.ModuleList(ParallelBlock(dim, heads, bug=bug) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


BUGS = ("qk-norm-over-tokens", "split-heads-by-reshape")
TWINS = ("merge-heads-d-major",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return ViT22BEncoder(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
