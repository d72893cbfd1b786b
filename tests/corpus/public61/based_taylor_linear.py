"""HazyResearch/based, based/models/mixers/linear_attention.py (``TaylorExp``: the second-order Taylor feature map
``cat([x[..., :1] ** 0, x / rrd, x2 / rd], dim=-1)`` with ``x2 = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(
start_dim=-2) / r2``, ``rd = sqrt(input_dim)``, ``rrd = sqrt(rd)``; ``LinearAttention.forward`` in its causal,
non-kernel path): ``proj_q``/``proj_k`` to ``feature_dim * num_heads``, ``proj_v`` to ``num_key_value_heads *
head_dim``, ``view(b, l, heads, dim).transpose(1, 2)``; the feature map on q and k; ``q, k, v = q.unsqueeze(-2),
k.unsqueeze(-2), v.unsqueeze(-1)`` so that ``(k * v)`` is every token's ``head_dim x feature`` outer product;
``y = (q * (k * v).cumsum(dim=2)).sum(dim=-1) / ((q * k.cumsum(dim=2)).sum(dim=-1) + eps)`` (the running sums
over the tokens); ``rearrange(y, 'b h l d -> b l (h d)')``, ``out_proj``.

Bugs: ``kv-cumsum-over-heads``: the numerator's state ``(k * v).cumsum(dim=1)`` (the prefix sum over the heads:
each head reads the key-value products of the heads before it, at the same token, and nothing of the earlier
tokens); ``denominator-not-causal``: ``k.sum(dim=2, keepdim=True)`` in the denominator (the non-causal branch's
normaliser under the causal numerator: every token divided by a sum over the whole sequence, future keys
included); ``heads-view-no-transpose``: ``view(b, heads, l, dim)`` for q, k and v (the projection's ``(l, heads ·
dim)`` rows read as ``(heads, l, dim)``: "heads" and "tokens" are interleaved pieces of both)."""

import math
import sys

import torch
from einops import rearrange
from torch import nn


class TaylorExp(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.input_dim = input_dim
        self.r2 = math.sqrt(2)
        self.rd = math.sqrt(self.input_dim)
        self.rrd = math.sqrt(self.rd)

    def forward(self, x):
        x2 = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(start_dim=-2) / self.r2     # (b, h, l, f·f)
        return torch.cat([x[..., :1] ** 0, x / self.rrd, x2 / self.rd], dim=-1)     # (b, h, l, 1 + f + f·f)


class LinearAttention(nn.Module):
    def __init__(self, d_model, num_heads, feature_dim=3, eps=1e-12, bug=""):
        super().__init__()
        self.d_model, self.feature_dim, self.eps, self.bug = d_model, feature_dim, eps, bug
        self.num_heads = self.num_key_value_heads = num_heads
        self.head_dim = d_model // num_heads
        self.feature_map = TaylorExp(feature_dim)
        self.proj_q = nn.Linear(d_model, feature_dim * num_heads, bias=False)
        self.proj_k = nn.Linear(d_model, feature_dim * num_heads, bias=False)
        self.proj_v = nn.Linear(d_model, self.num_key_value_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(self.head_dim * num_heads, d_model, bias=False)

    def forward(self, hidden_states):
        b, l, _ = hidden_states.size()  # noqa: E741
        q, k, v = self.proj_q(hidden_states), self.proj_k(hidden_states), self.proj_v(hidden_states)
        if self.bug == "heads-view-no-transpose":
            q = q.view(b, self.num_heads, l, self.feature_dim)
            k = k.view(b, self.num_key_value_heads, l, self.feature_dim)
            v = v.view(b, self.num_key_value_heads, l, self.head_dim)
        else:
            q = q.view(b, l, self.num_heads, self.feature_dim).transpose(1, 2)           # (b, h, l, f)
            k = k.view(b, l, self.num_key_value_heads, self.feature_dim).transpose(1, 2)  # (b, h, l, f)
            v = v.view(b, l, self.num_key_value_heads, self.head_dim).transpose(1, 2)     # (b, h, l, d)

        # Linear attention
        q, k = self.feature_map(q), self.feature_map(k)                               # (b, h, l, F)
        q, k, v = q.unsqueeze(-2), k.unsqueeze(-2), v.unsqueeze(-1)                   # (b, h, l, 1, F) (b, h, l, d, 1)

        # Compute attention (causal)
        kv_state = (k * v).cumsum(dim=1 if self.bug == "kv-cumsum-over-heads" else 2)  # (b, h, l, d, F)
        if self.bug == "denominator-not-causal":
            k_state = k.sum(dim=2, keepdim=True)                                      # (b, h, 1, 1, F)
        else:
            k_state = k.cumsum(dim=2)                                                 # (b, h, l, 1, F)
        y = (q * kv_state).sum(dim=-1) / ((q * k_state).sum(dim=-1) + self.eps)       # (b, h, l, d)
        y = rearrange(y, 'b h l d -> b l (h d)')                                      # (b, l, h·d)
        return self.out_proj(y.to(hidden_states.dtype))


BUGS = ("kv-cumsum-over-heads", "denominator-not-causal", "heads-view-no-transpose")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """Based's causal Taylor linear attention, 3 projected features per head (13 after the expansion)."""
    torch.manual_seed(0)
    return LinearAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
