"""lucidrains/g-mlp-pytorch, g_mlp_pytorch/g_mlp_pytorch.py (v0.1, ``SpatialGatingUnit``, ``gMLPBlock``) with
``attn_dim`` (aMLP's tiny attention): ``proj_in`` (GELU) to ``dim_ff``; the tiny single-head attention on the block
input, ``qkv = to_qkv(x).chunk(3, dim=-1)``, ``sim = einsum('b i d, b j d -> b i j', q, k) * scale``, ``softmax
(dim=-1)``, ``to_out``; the spatial gating unit: ``res, gate = x.chunk(2, dim=-1)``, ``gate = norm(gate)``, a
token-mixing ``einsum('b n d, m n -> b m d', gate, weight) + bias`` with ``weight`` a learnt ``(T, T)`` table
(token mixing by design), the causal variant masks its upper triangle; ``gate + tiny_attn``; ``res * gate``;
``proj_out``.

Bugs (argument): ``causal-mask-transposed``: the causal weight mask ``tril`` applied as ``weight.masked_fill(
mask.t(), 0)`` (the gate reads later tokens); ``gate-mixes-features``: ``einsum('b n d, m d -> b n m')`` with
a ``(dim_ff/2, dim_ff/2)`` weight, the gate mixing its channels where the tokens are meant (at dim_ff/2 = T the
weight has the same shape)."""

import sys

import torch
from torch import einsum, nn


class Attention(nn.Module):
    def __init__(self, dim_in, dim_out, dim_inner):
        super().__init__()
        self.scale = dim_inner**-0.5
        self.to_qkv = nn.Linear(dim_in, dim_inner * 3, bias=False)
        self.to_out = nn.Linear(dim_inner, dim_out)

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        sim = einsum("b i d, b j d -> b i j", q, k) * self.scale
        n = sim.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        sim = sim.masked_fill(mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        return self.to_out(einsum("b i j, b j d -> b i d", attn, v))


class SpatialGatingUnit(nn.Module):
    def __init__(self, dim, dim_seq, bug=""):
        super().__init__()
        dim_out = dim // 2
        self.bug = bug
        self.norm = nn.LayerNorm(dim_out)
        size = dim_out if bug == "gate-mixes-features" else dim_seq
        self.weight = nn.Parameter(torch.empty(size, size).uniform_(-1e-3 / dim_seq, 1e-3 / dim_seq))
        self.bias = nn.Parameter(torch.ones(size))

    def forward(self, x, gate_res=None):                                           # (B, T, F)
        n = x.shape[1]
        res, gate = x.chunk(2, dim=-1)
        gate = self.norm(gate)
        weight, bias = self.weight, self.bias
        if self.bug == "gate-mixes-features":
            gate = einsum("b n d, m d -> b n m", gate, weight) + bias
        else:
            weight, bias = weight[:n, :n], bias[:n]
            mask = torch.ones(weight.shape[:2]).triu_(1).bool()
            weight = weight.masked_fill(mask.t() if self.bug == "causal-mask-transposed" else mask, 0.0)
            gate = einsum("b n d, m n -> b m d", gate, weight) + bias[None, :, None]
        if gate_res is not None:
            gate = gate + gate_res
        return gate * res


class gMLPBlock(nn.Module):
    def __init__(self, dim, dim_ff, seq_len, attn_dim, bug=""):
        super().__init__()
        self.proj_in = nn.Sequential(nn.Linear(dim, dim_ff), nn.GELU())
        self.attn = Attention(dim, dim_ff // 2, attn_dim)
        self.sgu = SpatialGatingUnit(dim_ff, seq_len, bug)
        self.proj_out = nn.Linear(dim_ff // 2, dim)

    def forward(self, x):                                                          # (B, T, D)
        gate_res = self.attn(x)
        x = self.proj_in(x)
        x = self.sgu(x, gate_res=gate_res)
        return self.proj_out(x)


BUGS = ("causal-mask-transposed", "gate-mixes-features")
TWINS = ()
DIMS = ("B=2 T=6 D=32",)
EQUAL = {"B=2 T=6 D=32": "B=4 T=4 D=32"}


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return gMLPBlock(D, 2 * D, 16, 16, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
