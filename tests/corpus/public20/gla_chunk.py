"""fla-org/flash-linear-attention, fla/ops/gla/naive.py and fla/layers/gla.py (``GatedLinearAttention``, 0.1),
the parallel form of one chunk: ``q, k, v = q_proj(x), k_proj(x), v_proj(x)``, ``rearrange('b t (h d) -> b h t
d')``; per-key gates ``gk = logsigmoid(gk_proj(x)) / normalizer`` ``(B, H, T, d_k)``; ``g = gk.cumsum(-2)``
(cumulative over the tokens); ``q_ = q * exp(g)``, ``k_ = k * exp(-g)``; ``A = (q_ @ k_.transpose(-1, -2)) *
scale`` masked to the lower triangle (``masked_fill(~tril, 0)``: no softmax); ``o = A @ v``; a per-head
``RMSNorm`` on ``o``, the output gate ``swish(g_proj(x))``; ``o_proj``.

Bugs (argument): ``gate-cumsum-over-features``: ``gk.cumsum(-1)`` (the decay accumulated over the key features
instead of the tokens: a natural slip of the axis); ``mask-keeps-upper``: ``masked_fill(~triu, 0)`` (each token
reads the later ones)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class GatedLinearAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.gk_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.g_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.g_norm = nn.RMSNorm(self.head_dim)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x):                                                          # (B, T, D)
        q, k, v, gk = (rearrange(p(x), "b t (h d) -> b h t d", h=self.num_heads)
                       for p in (self.q_proj, self.k_proj, self.v_proj, self.gk_proj))
        gk = F.logsigmoid(gk) / 16
        g = gk.cumsum(-1 if self.bug == "gate-cumsum-over-features" else -2)
        q_, k_ = q * g.exp(), k * (-g).exp()
        A = (q_ @ k_.transpose(-1, -2)) * self.head_dim**-0.5                      # (B, H, T, T)
        T = A.size(-1)
        ones = torch.ones(T, T, dtype=torch.bool)
        keep = ones.triu() if self.bug == "mask-keeps-upper" else ones.tril()
        o = A.masked_fill(~keep, 0) @ v                                            # (B, H, T, d)
        o = self.g_norm(rearrange(o, "b h t d -> b t h d"))
        o = rearrange(o, "b t h d -> b t (h d)") * F.silu(self.g_proj(x))
        return self.o_proj(o)


BUGS = ("gate-cumsum-over-features", "mask-keeps-upper")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return GatedLinearAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
