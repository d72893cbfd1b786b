"""Rotary position embeddings: Meta's complex-number RoPE (``view_as_complex`` / ``view_as_real``) and
the rotate-half form, each applied correctly and over the wrong axis (issue 21, corpus).

The wrong-axis bugs only run when T == H (the table built over T broadcasts onto the heads axis), so
they and their twins use ``SQUARE``.
"""

from __future__ import annotations

import torch
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=5 D=24 H=3"            # d_k = 8
SQUARE = "B=2 T=4 D=32 H=4"          # T == H, d_k = 8


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    """meta-llama/llama model.py: the rotations as complex numbers, (T, d_k/2)."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end).float()
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))   # (T, d_k/2) complex


def reshape_for_broadcast(freqs_cis, x):
    """meta-llama/llama: (T, d_k/2) -> (1, T, 1, d_k/2) for x (B, T, H, d_k/2); it asserts
    ``freqs_cis.shape == (x.shape[1], x.shape[-1])``, which x (B, H, T, d_k/2) passes when T == H."""
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)                                     # (1, T, 1, d_k/2) [rope-table]


def apply_rotary_emb(xq, xk, freqs_cis):
    """meta-llama/llama ``apply_rotary_emb``: pairs of features as complex numbers, rotated, back."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))  # (B, T, H, d_k/2) [rope-complex]
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))  # (B, T, H, d_k/2)
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)                 # (1, T, 1, d_k/2)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)           # (B, T, H, d_k) [rope-q][bug-rope-axis]
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)           # (B, T, H, d_k) [bug-rope-axis]
    return xq_out.type_as(xq), xk_out.type_as(xk)


class LlamaComplexRoPE(nn.Module):
    """meta-llama/llama ``Attention.forward``: RoPE on (B, T, H, d_k), before the transpose. With
    ``after_transpose=True`` it runs on (B, H, T, d_k): the table built over positions lines up with
    the heads, so each head is rotated by its own index — rotary applied over the wrong axis, as in
    facebookresearch/xformers#841 (RotaryEmbedding given ``seq_dimension=-2`` on [B, M, H, K] rotates
    over heads) and deepspeedai/DeepSpeed#2782 (rotary computed as if q and k were not transposed)."""

    def __init__(self, dim: int, heads: int, seq: int, after_transpose: bool = False):
        super().__init__()
        self.heads, self.after_transpose = heads, after_transpose
        self.wq, self.wk = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.wv, self.wo = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim // heads, seq), persistent=False)

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        xq = self.wq(x).view(B, T, H, d)                              # (B, T, H, d_k)
        xk = self.wk(x).view(B, T, H, d)                              # (B, T, H, d_k)
        xv = self.wv(x).view(B, T, H, d)                              # (B, T, H, d_k)
        if self.after_transpose:
            xq, xk = xq.transpose(1, 2), xk.transpose(1, 2)           # (B, H, T, d_k): rotated below as if (B, T, ...)
            xq, xk = apply_rotary_emb(xq, xk, self.freqs_cis[:T])     # (B, H, T, d_k)
        else:
            xq, xk = apply_rotary_emb(xq, xk, self.freqs_cis[:T])     # (B, T, H, d_k)
            xq, xk = xq.transpose(1, 2), xk.transpose(1, 2)           # (B, H, T, d_k) [llama-q]
        scores = xq @ xk.transpose(2, 3) / d ** 0.5                   # (B, H, T, T) [llama-scores]
        y = scores.softmax(dim=-1) @ xv.transpose(1, 2)               # (B, H, T, d_k)
        return self.wo(y.transpose(1, 2).reshape(B, T, D))            # (B, T, D)


def rotate_half(x):
    """huggingface/transformers Llama ``rotate_half``."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)                               # (B, H, T, d_k) [rotate-half]


class RotateHalfRoPE(nn.Module):
    """huggingface/transformers Llama: ``LlamaRotaryEmbedding`` gives cos/sin (B, T, d_k) from position
    ids, ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)`` broadcasts them over the heads of
    q (B, H, T, d_k). Its docstring says ``unsqueeze_dim=2`` is for q laid out (B, T, H, d_k); passing
    2 with (B, H, T, d_k) lines the positions up with the heads (T == H here)."""

    def __init__(self, dim: int, heads: int, unsqueeze_dim: int = 1):
        super().__init__()
        self.heads, self.unsqueeze_dim = heads, unsqueeze_dim
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        head_dim = dim // heads
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)),
                             persistent=False)

    def rotary(self, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]  # (B, T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                       # (B, T, d_k)
        return emb.cos(), emb.sin()

    def forward(self, x, position_ids):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        q = self.q_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        cos, sin = self.rotary(position_ids)                          # (B, T, d_k) x 2
        cos, sin = cos.unsqueeze(self.unsqueeze_dim), sin.unsqueeze(self.unsqueeze_dim)  # [half-table]
        q = q * cos + rotate_half(q) * sin                            # (B, H, T, d_k) [bug-half-axis]
        k = k * cos + rotate_half(k) * sin                            # (B, H, T, d_k) [bug-half-axis]
        scores = q @ k.transpose(2, 3) / d ** 0.5                     # (B, H, T, T) [half-scores]
        y = scores.softmax(dim=-1) @ v                                # (B, H, T, d_k)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, D))        # (B, T, D)


def llama(B: int, T: int, D: int, H: int, **kwargs):
    def make():
        return LlamaComplexRoPE(D, H, seq=T, **kwargs).eval(), (torch.randn(B, T, D),)
    return make


def hf(B: int, T: int, D: int, H: int, **kwargs):
    def make():
        position_ids = torch.arange(T).expand(B, T)                   # (B, T)
        return RotateHalfRoPE(D, H, **kwargs).eval(), (torch.randn(B, T, D), position_ids)
    return make


PER_HEAD = ("B", "H", "T", "d_k")

CASES = [
    Case("llama-complex-rope", DIMS, llama(2, 5, 24, 3),
         heads={"rope-complex": ("B", "T", "H", "?"), "rope-q": ("B", "T", "H", "d_k"), "llama-q": PER_HEAD,
                "llama-scores": ("B", "H", "T", "T")},
         silent=("rope-complex",)),
    Case("llama-complex-rope-T-eq-H", SQUARE, llama(2, 4, 32, 4),
         heads={"rope-q": ("B", "T", "H", "d_k"), "llama-q": PER_HEAD}),
    Case("llama-complex-rope-after-transpose", SQUARE, llama(2, 4, 32, 4, after_transpose=True),
         bug=("bug-rope-axis",)),   # freqs_cis[:T], T read from x.shape: its rows are T (issue 33)
    Case("rotate-half-rope-unsqueeze-heads", DIMS, hf(2, 5, 24, 3),
         heads={"rotate-half": PER_HEAD, "half-scores": ("B", "H", "T", "T")}),
    Case("rotate-half-rope-unsqueeze-heads-T-eq-H", SQUARE, hf(2, 4, 32, 4),
         heads={"rotate-half": PER_HEAD, "half-scores": ("B", "H", "T", "T")}),
    Case("rotate-half-rope-unsqueeze-dim-2-on-bhtd", SQUARE, hf(2, 4, 32, 4, unsqueeze_dim=2),
         bug=("bug-half-axis",)),
]


test_names, test_verdict = corpus_tests(__name__, CASES)
