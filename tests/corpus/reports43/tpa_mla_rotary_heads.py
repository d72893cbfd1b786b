"""tensorgi/TPA issue #4 ("Bug in MLA implementation", closed; lauyikfung: "We have corrected the code for MLA and
run new MLA experiments"): ``model/llama-mla.py``'s ``CausalSelfAttention`` (the multi-head latent attention baseline
of the TPA paper) transposes the head and token axes, ``q.view(B, T, n_head, q_head_dim).transpose(1, 2)``, before
the rotary step, while its ``Rotary`` reads ``seq_len = x.shape[1]`` and returns ``cos[None, :, None, :]``: the
rotary table runs along the heads ("the sequence length dimension is 2, but in the Rotary class it is assumed to be
1. I guess this is the reason why MLA perform much worse in your original paper"), and the one key head of
``k_pe`` is turned by angle 0. Here the fixed code rotates ``q_pe`` and ``k_pe`` in the ``(B, T, heads, r)`` layout.

The idiom (the file's MLA): ``q_a_proj`` (to ``q_lora_rank``), ``q_a_layernorm`` (RMSNorm), ``q_b_proj``,
``split([qk_nope_head_dim, qk_rope_head_dim])``; ``kv_a_proj_with_mqa`` to ``kv_lora_rank + qk_rope_head_dim``,
``split``, ``k_pe.view(B, T, 1, r)``, ``kv_b_proj(kv_a_layernorm(compressed_kv))`` viewed ``(B, T, n_head, nope +
v_head_dim)`` and split; ``Rotary``/``apply_rotary_emb`` (halves: ``x1 * cos + x2 * sin``, ``x1 * (-sin) + x2 *
cos``); ``q_new``/``k`` assembled by ``new_empty`` and slice assignment, ``F.scaled_dot_product_attention(...,
is_causal=True, scale=1/sqrt(head_dim))``, ``y.transpose(1, 2).contiguous().reshape(B, T, n_head * v_head_dim)``,
``c_proj``. Sizes: nope = v = D / H, rope = D / (2H), both lora ranks D / 2.

Bugs: ``rope-after-transpose``: the rotary step on the ``(B, n_head, T, r)`` layout (the report);
``merge-without-transpose``: ``y.reshape(B, T, n_head * v_head_dim)`` without ``transpose(1, 2)``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rope-after-transpose", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class Rotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, x):
        seq_len = x.shape[1]
        t = torch.arange(seq_len).type_as(self.inv_freq)
        freqs = torch.outer(t, self.inv_freq)                                           # (T, r/2)
        return freqs.cos()[None, :, None, :], freqs.sin()[None, :, None, :]             # (1, T, 1, r/2)


def apply_rotary_emb(x, cos, sin):
    assert x.ndim == 4  # multihead attention
    d = x.shape[3] // 2
    x1, x2 = x[..., :d], x[..., d:]
    y1 = x1 * cos + x2 * sin
    y2 = x1 * (-sin) + x2 * cos
    return torch.cat([y1, y2], 3).type_as(x)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bug=""):
        super().__init__()
        self.n_head, self.bug = n_head, bug
        self.qk_nope_head_dim = self.v_head_dim = n_embd // n_head
        self.qk_rope_head_dim = n_embd // n_head // 2
        self.head_dim = self.q_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.q_lora_rank = self.kv_lora_rank = n_embd // 2
        self.q_a_proj = nn.Linear(n_embd, self.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(self.q_lora_rank)
        self.q_b_proj = nn.Linear(self.q_lora_rank, n_head * self.q_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(n_embd, self.kv_lora_rank + self.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(self.kv_lora_rank)
        self.kv_b_proj = nn.Linear(self.kv_lora_rank, n_head * (self.qk_nope_head_dim + self.v_head_dim), bias=False)
        self.c_proj = nn.Linear(n_head * self.v_head_dim, n_embd, bias=False)
        self.rotary = Rotary(self.qk_rope_head_dim)

    def forward(self, x):
        B, T, C = x.size()
        nope, rope, H = self.qk_nope_head_dim, self.qk_rope_head_dim, self.n_head
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(B, T, H, self.q_head_dim)                                           # (B, T, H, q_head_dim)
        compressed_kv, k_pe = torch.split(self.kv_a_proj_with_mqa(x), [self.kv_lora_rank, rope], dim=-1)
        k_pe = k_pe.view(B, T, 1, rope)                                                 # (B, T, 1, r)
        if self.bug != "rope-after-transpose":
            q_nope, q_pe = torch.split(q, [nope, rope], dim=-1)
            cos, sin = self.rotary(q_pe)
            q_pe, k_pe = apply_rotary_emb(q_pe, cos, sin), apply_rotary_emb(k_pe, cos, sin)
            q_nope, q_pe, k_pe = q_nope.transpose(1, 2), q_pe.transpose(1, 2), k_pe.transpose(1, 2)  # (B, H, T, .)
        else:
            q_nope, q_pe = torch.split(q.transpose(1, 2), [nope, rope], dim=-1)         # (B, H, T, .)
            k_pe = k_pe.transpose(1, 2)                                                 # (B, 1, T, r)
            cos_q, sin_q = self.rotary(q_pe)
            cos_k, sin_k = self.rotary(k_pe)
            q_pe, k_pe = apply_rotary_emb(q_pe, cos_q, sin_q), apply_rotary_emb(k_pe, cos_k, sin_k)
        kv = self.kv_b_proj(self.kv_a_layernorm(compressed_kv)).view(B, T, H, nope + self.v_head_dim).transpose(1, 2)
        k_nope, v = torch.split(kv, [nope, self.v_head_dim], dim=-1)                   # (B, H, T, .)
        q_new = q.new_empty(B, H, T, self.q_head_dim)
        q_new[:, :, :, :nope] = q_nope
        q_new[:, :, :, nope:] = q_pe
        k = k_pe.new_empty(B, H, T, self.q_head_dim)
        k[:, :, :, :nope] = k_nope
        k[:, :, :, nope:] = k_pe
        y = F.scaled_dot_product_attention(q_new, k, v, is_causal=True, scale=1. / math.sqrt(self.head_dim))
        if self.bug != "merge-without-transpose":
            y = y.transpose(1, 2)                                                       # (B, T, H, v)
        return self.c_proj(y.contiguous().reshape(B, T, H * self.v_head_dim))          # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CausalSelfAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
