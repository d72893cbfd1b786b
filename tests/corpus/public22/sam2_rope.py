"""facebookresearch/sam2, ``sam2/modeling/sam/transformer.py`` (``RoPEAttention``, v1.0, 2024) with
``sam2/modeling/position_encoding.py`` (``compute_axial_cis``, ``reshape_for_broadcast``, ``apply_rotary_enc``):
the memory attention's cross-attention from the current frame's image tokens to the memory of earlier frames:
``q_proj``/``k_proj``/``v_proj``, ``_separate_heads`` (``reshape(b, n, h, c // h).transpose(1, 2)``); the axial
2-D rotary written with complex numbers: ``t_x = t % end_x``, ``t_y = t // end_x``, ``torch.polar`` of
``outer(t, freqs)`` per axis, ``cat([freqs_cis_x, freqs_cis_y], dim=-1)``; ``view_as_complex`` of
``reshape(*shape[:-1], -1, 2)``; the keys, ``r`` frames of memory (more keys than queries), take the table
``repeat``-ed ``r`` times along the tokens (``repeat_freqs_k``); ``view_as_real(...).flatten(3)``;
``scaled_dot_product_attention``; ``_recombine_heads`` (``transpose(1, 2).reshape(b, n, h * c)``); ``out_proj``.

Bugs (argument): ``freqs-repeat-interleave``: the keys' table repeated with ``repeat_interleave(r, dim=-2)``
(each position's angle given to ``r`` consecutive memory tokens instead of each frame getting the whole grid:
the natural slip between ``repeat`` and ``repeat_interleave``); ``heads-reshape-without-transpose``:
``_separate_heads`` as ``reshape(b, h, n, c // h)`` (the transpose forgotten, as FuxiCTR #30's heads view)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def compute_axial_cis(dim, end_x, end_y, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))
    t = torch.arange(end_x * end_y, dtype=torch.float32)
    t_x, t_y = t % end_x, torch.div(t, end_x, rounding_mode="floor")
    freqs_x, freqs_y = torch.outer(t_x, freqs), torch.outer(t_y, freqs)
    freqs_cis_x = torch.polar(torch.ones_like(freqs_x), freqs_x)
    freqs_cis_y = torch.polar(torch.ones_like(freqs_y), freqs_y)
    return torch.cat([freqs_cis_x, freqs_cis_y], dim=-1)                      # (N, c/2) complex


def reshape_for_broadcast(freqs_cis, x):
    shape = [d if i >= x.ndim - 2 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_enc(xq, xk, freqs_cis, repeat_freqs_k=False, bug=""):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))   # (B, h, N, c/2)
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))   # (B, h, r*N, c/2)
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    if repeat_freqs_k:
        r = xk_.shape[-2] // xq_.shape[-2]
        if bug == "freqs-repeat-interleave":
            freqs_cis = freqs_cis.repeat_interleave(r, dim=-2)
        else:
            freqs_cis = freqs_cis.repeat(*([1] * (freqs_cis.ndim - 2)), r, 1)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class RoPEAttention(nn.Module):
    def __init__(self, embedding_dim, num_heads, feat_sizes, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.q_proj = nn.Linear(embedding_dim, embedding_dim)
        self.k_proj = nn.Linear(embedding_dim, embedding_dim)
        self.v_proj = nn.Linear(embedding_dim, embedding_dim)
        self.out_proj = nn.Linear(embedding_dim, embedding_dim)
        self.freqs_cis = compute_axial_cis(embedding_dim // num_heads, *feat_sizes)

    def _separate_heads(self, x, num_heads):
        b, n, c = x.shape
        if self.bug == "heads-reshape-without-transpose":
            return x.reshape(b, num_heads, n, c // num_heads)
        x = x.reshape(b, n, num_heads, c // num_heads)
        return x.transpose(1, 2)                                              # (B, h, n, c)

    def _recombine_heads(self, x):
        b, n_heads, n_tokens, c_per_head = x.shape
        x = x.transpose(1, 2)
        return x.reshape(b, n_tokens, n_heads * c_per_head)                   # (B, n, D)

    def forward(self, q, k, v):
        q = self._separate_heads(self.q_proj(q), self.num_heads)
        k = self._separate_heads(self.k_proj(k), self.num_heads)
        v = self._separate_heads(self.v_proj(v), self.num_heads)
        q, k = apply_rotary_enc(q, k, self.freqs_cis, repeat_freqs_k=True, bug=self.bug)
        out = F.scaled_dot_product_attention(q, k, v)                         # (B, h, N, c)
        return self.out_proj(self._recombine_heads(out))


BUGS = ("freqs-repeat-interleave", "heads-reshape-without-transpose")
TWINS = ()
#: T: the image tokens of a 3 x 2 grid; S: the memory, 2 earlier frames of it (S = 2 T, declared as a user
#: declares the keys' length of cross-attention)
DIMS = ("B=2 T=6 S=12 D=32 H=4",)
EQUAL = {"B=2 T=6 S=12 D=32 H=4": "B=4 T=4 S=8 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    feat = (3, 2) if T == 6 else (2, T // 2)
    model = RoPEAttention(D, H, feat, bug).eval()
    memory = torch.randn(B, 2 * T, D)
    return model, (torch.randn(B, T, D), memory, memory)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
