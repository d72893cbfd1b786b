"""kyegomez/zeta issue #180 ("[BUG] RMSNorm Implementation", labelled bug): zeta's ``RMSNorm`` computed
``norm = torch.norm(x, dim=-2, keepdim=True) * self.scale`` on ``(B, T, D)`` inputs, so the root mean square
was taken over the *tokens* of each feature (dim -2) instead of over the features of each token, and it
multiplied by ``scale = dim ** -0.5`` where the RMS divides by ``sqrt(dim)`` (the report: "I think the
normalization should be in the dim -1, not -2"). In a causal decoder the statistic over the tokens lets
every token's normalised features read the later tokens (a leak of the future).

The idiom: zeta's pre-norm decoder block (``RMSNorm`` with ``self.scale`` and a gain ``g``, then causal
multi-head attention: one ``to_qkv`` linear, ``chunk(3)``, ``rearrange``-style ``view(B, T, H, d).permute``,
``einsum`` scores, ``masked_fill`` with ``triu``, ``softmax(-1)``, the heads merged back, a residual).

Bug (argument): ``rms-over-tokens``: the norm over ``dim=-2`` (and ``* scale``)."""

import sys

import torch
from torch import nn

BUGS = ("rms-over-tokens",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-8, bug=""):
        super().__init__()
        self.scale, self.eps, self.bug = dim ** -0.5, eps, bug
        self.g = nn.Parameter(torch.ones(dim))

    def forward(self, x):                                                       # (B, T, D)
        if self.bug == "rms-over-tokens":
            norm = torch.norm(x, dim=-2, keepdim=True) * self.scale             # [norm] (B, 1, D)
            return x / norm.clamp(min=self.eps) * self.g
        norm = torch.norm(x, dim=-1, keepdim=True) * self.scale                # [norm] (B, T, 1)
        return x / norm.clamp(min=self.eps) * self.g


class CausalAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):                                                       # (B, T, D)
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, self.heads, self.head_dim).permute(0, 2, 1, 3)  # (B, H, T, d)
                   for z in self.to_qkv(x).chunk(3, dim=-1))
        sim = torch.einsum("bhid,bhjd->bhij", q, k) * self.head_dim ** -0.5     # (B, H, T, T)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        attn = sim.masked_fill(causal, -torch.finfo(sim.dtype).max).softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v)                          # (B, H, T, d)
        return self.to_out(out.permute(0, 2, 1, 3).reshape(b, t, -1))           # (B, T, D)


class DecoderBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm, self.attn = RMSNorm(dim, bug=bug), CausalAttention(dim, heads)

    def forward(self, x):
        return x + self.attn(self.norm(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return DecoderBlock(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
