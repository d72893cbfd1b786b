"""fla-org/flash-linear-attention, fla/ops/delta_rule/naive.py (``delta_rule_recurrence``) called the way
fla/layers/delta_net.py (``DeltaNet.forward``, the head-first releases of 2024, ``use_short_conv=False``,
``qk_activation='silu'``, ``qk_norm='l2'``) calls its kernels: DeltaNet, a linear attention whose fast-weight state
``S (b, h, d_k, d_v)`` is written with the delta rule. The layer projects q, k, v, applies ``silu``, splits heads
``rearrange('b t (h d) -> b h t d')``, L2-normalises q and k over each head's features, and makes one writing
strength per head and token ``beta = rearrange(b_proj(x), 'b t h -> b h t').sigmoid()``. The recurrence scales q by
``d_k ** -0.5`` and for each token ``i``: reads the state at the key, ``(S * k_i[..., None]).sum(-2)``, takes the
error ``v_i - S^T k_i`` scaled by ``beta_i``, writes ``S += k_i.unsqueeze(-1) * u_i.unsqueeze(-2)`` (an outer
product, keys along rows), and reads ``o_i = einsum('bhd,bhdm->bhm', q_i, S)``. The layer then puts the tokens
first again ``'b h t d -> b t h d'``, a per-head RMSNorm, ``'b t h d -> b t (h d)'``, ``o_proj``.

Bugs: ``beta-view-not-rearrange``: ``b_proj(x).view(b, h, t)`` for the ``'b t h -> b h t'`` rearrange (the
writing strengths of heads and tokens interleaved: head 0's first tokens get other heads' betas);
``state-update-transposed``: ``S += u_i.unsqueeze(-1) * k_i.unsqueeze(-2)`` (the outer product written values
along rows; with ``d_k = d_v`` it runs, and every later read ``S^T k`` and ``q S`` reads the transposed memory);
``l2norm-before-head-split``: ``F.normalize(k, dim=-1)`` on the ``(b, t, h·d)`` projection before the heads are
split (each head's key is no longer unit length, so the delta rule's ``I - beta k k^T`` is no longer a contraction
for every head)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def delta_rule_recurrence(q, k, v, beta, bug=""):
    b, h, l, d_k = q.shape  # noqa: E741
    d_v = v.shape[-1]
    o = torch.zeros_like(v)                                                    # (b, h, l, d_v)
    S = torch.zeros(b, h, d_k, d_v).to(v)                                      # (b, h, d_k, d_v)
    q = q * (d_k ** -0.5)
    if beta.ndim < v.ndim:
        beta = beta[..., None]                                                 # (b, h, l, 1)
    for i in range(l):
        _k = k[:, :, i]                                                        # (b, h, d_k)
        _q = q[:, :, i]                                                        # (b, h, d_k)
        _v = v[:, :, i].clone()                                                # (b, h, d_v)
        beta_i = beta[:, :, i]                                                 # (b, h, 1)
        _v = _v - (S.clone() * _k[..., None]).sum(-2)                          # (b, h, d_v)
        _v = _v * beta_i
        if bug == "state-update-transposed":
            S = S.clone() + _v.unsqueeze(-1) * _k.unsqueeze(-2)
        else:
            S = S.clone() + _k.unsqueeze(-1) * _v.unsqueeze(-2)                # (b, h, d_k, d_v)
        o[:, :, i] = torch.einsum("bhd,bhdm->bhm", _q, S)                      # (b, h, d_v)
    return o, S


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(hidden_size)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class DeltaNet(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.hidden_size, self.num_heads, self.bug = hidden_size, num_heads, bug
        self.head_k_dim = self.head_v_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.b_proj = nn.Linear(hidden_size, num_heads, bias=False)
        self.o_norm = RMSNorm(self.head_v_dim)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states):
        batch_size, q_len, _ = hidden_states.shape
        q = F.silu(self.q_proj(hidden_states))                                 # (b, t, h·d)
        k = F.silu(self.k_proj(hidden_states))                                 # (b, t, h·d)
        v = F.silu(self.v_proj(hidden_states))                                 # (b, t, h·d)
        if self.bug == "l2norm-before-head-split":
            q, k = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
        q, k, v = (rearrange(x, "b t (h d) -> b h t d", h=self.num_heads) for x in (q, k, v))   # (b, h, t, d)
        if self.bug != "l2norm-before-head-split":
            q, k = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
        if self.bug == "beta-view-not-rearrange":
            beta = self.b_proj(hidden_states).view(batch_size, self.num_heads, q_len).sigmoid()
        else:
            beta = rearrange(self.b_proj(hidden_states), "b t h -> b h t").sigmoid()   # (b, h, t)
        o, _ = delta_rule_recurrence(q, k, v, beta, bug=self.bug)              # (b, h, t, d)
        o = rearrange(o, "b h t d -> b t h d")                                 # (b, t, h, d)
        o = self.o_norm(o)
        o = rearrange(o, "b t h d -> b t (h d)")                               # (b, t, h·d)
        return self.o_proj(o)


BUGS = ("beta-view-not-rearrange", "state-update-transposed", "l2norm-before-head-split")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """One DeltaNet layer on ``x (B, T, D)``, the naive token-by-token recurrence standing in for the kernels."""
    torch.manual_seed(0)
    return DeltaNet(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
