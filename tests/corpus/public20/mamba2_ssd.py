"""state-spaces/mamba, mamba_ssm/modules/ssd_minimal.py (``segsum``, ``ssd_minimal_discrete``, Mamba-2 of 2024),
the single-chunk case written as masked attention: ``segsum(x)``: ``x = repeat(x, '... d -> ... d e', e=T)``,
``x.masked_fill(~tril(ones(T, T), diagonal=-1), 0)``, ``cumsum(dim=-2)``, then ``masked_fill(~tril(ones(T, T),
diagonal=0), -inf)``; ``L = exp(segsum(A))`` ``(B, H, T, T)`` (row ``l``: the decay from each ``s`` up to
``l``); ``Y = einsum('bln, bsn, bhls, bshp -> blhp', C, B, L, X)``; around it the Mamba-2 block:
``in_proj`` to ``x, B, C, dt``; ``A = -exp(A_log)``; ``X = x * dt`` over ``(b, l, h, p)``; ``Y + D * x``;
``rearrange('b l h p -> b l (h p)')``; ``out_proj``.

Bugs (argument): ``decay-mask-upper``: ``triu`` in the second mask of ``segsum`` (each token reads the later
ones: a natural slip); ``L-transposed``: ``einsum('bln, bsn, bhsl, bshp -> blhp', ...)`` (the decay table read
with its query and key axes swapped, a natural slip of einsum letters)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn


def segsum(x, bug=""):                                                             # (..., T)
    T = x.size(-1)
    x = repeat(x, "... d -> ... d e", e=T)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    x_segsum = torch.cumsum(x, dim=-2)
    keep = torch.ones(T, T, dtype=torch.bool)
    keep = torch.triu(keep, diagonal=0) if bug == "decay-mask-upper" else torch.tril(keep, diagonal=0)
    return x_segsum.masked_fill(~keep, -torch.inf)                                # (..., T, T)


class Mamba2Mixer(nn.Module):
    def __init__(self, d_model, nheads, d_state=8, bug=""):
        super().__init__()
        self.nheads, self.d_state, self.bug = nheads, d_state, bug
        self.d_inner = d_model
        self.in_proj = nn.Linear(d_model, self.d_inner + 2 * d_state + nheads, bias=False)
        self.A_log = nn.Parameter(torch.rand(nheads).log())
        self.D = nn.Parameter(torch.ones(nheads))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def forward(self, u):                                                          # (B, T, D)
        x, Bm, Cm, dt = self.in_proj(u).split([self.d_inner, self.d_state, self.d_state, self.nheads], dim=-1)
        dt = F.softplus(dt)                                                        # (B, T, H)
        x = rearrange(x, "b l (h p) -> b l h p", h=self.nheads)
        A = -torch.exp(self.A_log)                                                 # (H,)
        A_dt = rearrange(A * dt, "b l h -> b h l")
        L = torch.exp(segsum(A_dt, self.bug))                                      # (B, H, T, T)
        eq = "bln, bsn, bhsl, bshp -> blhp" if self.bug == "L-transposed" else "bln, bsn, bhls, bshp -> blhp"
        y = torch.einsum(eq, Cm, Bm, L, x * dt[..., None])
        y = y + x * self.D[:, None]
        return self.out_proj(rearrange(y, "b l h p -> b l (h p)"))


BUGS = ("decay-mask-upper", "L-transposed")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Mamba2Mixer(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
