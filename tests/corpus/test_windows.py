"""Local and windowed attention built with ``Tensor.unfold`` and ``as_strided`` (issue 21, corpus)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=8 D=36 H=3"            # d_k = 12; windows of 2 or 3 tokens


class Heads(nn.Module):
    """q, k, v split into heads the usual way: view(B, T, H, d_k).transpose(1, 2)."""

    def __init__(self, dim: int = 36, heads: int = 3):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def split(self, x):
        B, T, D = x.shape
        d = D // self.heads
        return [p(x).view(B, T, self.heads, d).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)]

    def merge(self, y):
        B, H, T, d = y.shape
        return self.o_proj(y.transpose(1, 2).reshape(B, T, H * d))   # (B, T, D)


class UnfoldLocalAttention(Heads):
    """Sliding-window attention with ``Tensor.unfold`` over padded keys, as leaderj1001/Stand-Alone-
    Self-Attention (``k_out.unfold(2, kernel_size, stride)`` over a padded map) does in 2-D: each
    query scores the ``w`` keys around it. ``softmax_dim=2`` normalises the windowed scores
    [B, H, T, w] over the queries instead of the window, the wrong-axis softmax asked about in
    jadore801120/attention-is-all-you-need-pytorch#52."""

    def __init__(self, window: int = 3, softmax_dim: int = -1, causal: bool = False):
        super().__init__()
        self.window, self.softmax_dim, self.causal = window, softmax_dim, causal

    def forward(self, x):
        q, k, v = self.split(x)                                       # (B, H, T, d_k) x 3
        before, after = (self.window - 1, 0) if self.causal else (self.window // 2, self.window // 2)
        k_win = F.pad(k, (0, 0, before, after)).unfold(2, self.window, 1)  # (B, H, T, d_k, w) [unfold-k]
        v_win = F.pad(v, (0, 0, before, after)).unfold(2, self.window, 1)  # (B, H, T, d_k, w)
        scores = torch.einsum("bhtd,bhtdw->bhtw", q, k_win)           # (B, H, T, w) [unfold-scores]
        if self.softmax_dim == -1:
            weights = scores.softmax(dim=-1)                          # (B, H, T, w) [window-softmax]
        else:
            weights = scores.softmax(dim=self.softmax_dim)            # over the queries [bug-window-softmax]
        y = torch.einsum("bhtw,bhtdw->bhtd", weights, v_win)          # (B, H, T, d_k) [unfold-y]
        return self.merge(y)


class LongformerChunks(Heads):
    """huggingface/transformers Longformer ``_chunk``: (B*H, T, d_k) viewed as non-overlapping blocks of
    2w, then ``as_strided`` to overlapping chunks (stride w), and the chunked q·k of
    ``_sliding_chunks_query_key_matmul`` (``einsum("bcxd,bcyd->bcxy")``)."""

    def __init__(self, w: int = 2):
        super().__init__()
        self.w = w

    def chunk(self, t):
        t = t.view(t.size(0), t.size(1) // (self.w * 2), self.w * 2, t.size(2))  # (B*H, T/2w, 2w, d_k)
        size, stride = list(t.size()), list(t.stride())
        size[1], stride[1] = size[1] * 2 - 1, stride[1] // 2
        return t.as_strided(size=size, stride=stride)                # (B*H, T/w-1, 2w, d_k) [longformer-chunks]

    def forward(self, x):
        q, k, v = self.split(x)                                       # (B, H, T, d_k) x 3
        B, H, T, d = q.shape
        q = q.reshape(B * H, T, d)                                    # (B*H, T, d_k) [longformer-q]
        k = k.reshape(B * H, T, d)                                    # (B*H, T, d_k)
        scores = torch.einsum("bcxd,bcyd->bcxy", self.chunk(q), self.chunk(k))  # (B*H, chunks, 2w, 2w) [lf-scores]
        return scores.softmax(dim=-1)


class StridedWindows(Heads):
    """Non-overlapping windows read with ``as_strided`` and strides written for a contiguous
    [B, H, T, d_k] tensor. ``contiguous=False`` hands it q straight from ``transpose(1, 2)``, whose
    storage is still [B, T, H, d_k]: ``as_strided`` reads storage, not the view, so every "window"
    holds pieces of several heads and tokens (torch's ``as_strided`` docs warn that it works on the
    underlying storage; Longformer's ``_chunk`` above views its input first, which fails loudly on a
    non-contiguous tensor)."""

    def __init__(self, window: int = 2, contiguous: bool = True, own_strides: bool = False):
        super().__init__()
        self.window, self.contiguous, self.own_strides = window, contiguous, own_strides

    def windows(self, t):
        B, H, T, d = t.shape
        w = self.window
        strides = (H * T * d, T * d, w * d, d, 1)                     # a contiguous [B, H, T, d_k]'s
        if self.own_strides:   # read off the tensor itself, whatever its storage order
            sb, sh, st, sd = t.stride()
            strides = (sb, sh, w * st, st, sd)
        return t.as_strided((B, H, T // w, w, d), strides)  # (B, H, T/w, w, d_k) [strided-windows][bug-strided-storage]

    def forward(self, x):
        q, k, v = self.split(x)                                       # (B, H, T, d_k) x 3
        if self.contiguous:
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        qw, kw, vw = self.windows(q), self.windows(k), self.windows(v)  # (B, H, T/w, w, d_k) x 3
        scores = qw @ kw.transpose(-2, -1)                            # (B, H, T/w, w, w) [strided-scores]
        y = scores.softmax(dim=-1) @ vw                               # (B, H, T/w, w, d_k)
        return self.merge(y.flatten(2, 3))                            # (B, T, D)


def build(model_class, **kwargs):
    def make():
        return model_class(**kwargs).eval(), (torch.randn(2, 8, 36),)
    return make


PER_HEAD = ("B", "H", "T", "d_k")

CASES = [
    Case("local-attention-unfold-padded-keys", DIMS, build(UnfoldLocalAttention),
         heads={"unfold-k": ("B", "H", "T", "d_k", "?"), "unfold-scores": ("B", "H", "T", "?"),
                "unfold-y": PER_HEAD},
         silent=("unfold-k", "unfold-scores", "window-softmax", "unfold-y")),
    Case("local-attention-unfold-softmax-over-queries", DIMS, build(UnfoldLocalAttention, softmax_dim=2),
         bug=("bug-window-softmax",)),
    # lucidrains/local-attention with causal=True: each query looks back over w - 1 keys and itself
    # (the keys padded on the left only, then windows of w sliding by one)
    Case("local-attention-unfold-causal-left-pad", DIMS, build(UnfoldLocalAttention, causal=True),
         heads={"unfold-k": ("B", "H", "T", "d_k", "?"), "unfold-scores": ("B", "H", "T", "?"),
                "unfold-y": PER_HEAD},
         silent=("unfold-k", "unfold-scores", "window-softmax", "unfold-y")),
    Case("longformer-chunks-as-strided", DIMS, build(LongformerChunks),
         heads={"longformer-q": ("B*?", "T", "d_k"), "longformer-chunks": ("B*?", "?", "?", "d_k"),
                "lf-scores": ("B*?", "?", "?", "?")},
         silent=("longformer-chunks", "lf-scores")),
    Case("strided-windows-on-contiguous-heads", DIMS, build(StridedWindows),
         heads={"strided-windows": ("B", "H", "?", "?", "d_k"), "strided-scores": ("B", "H", "?", "?", "?")}),
    Case("strided-windows-on-transposed-storage", DIMS, build(StridedWindows, contiguous=False),
         bug=("bug-strided-storage",)),
    # the same windows on the transposed q, with strides read off q.stride() (what torch's as_strided
    # docs ask for: strides of the storage as it is): correct, whatever the storage order
    Case("strided-windows-own-strides-on-transposed-storage", DIMS,
         build(StridedWindows, contiguous=False, own_strides=True),
         heads={"strided-windows": ("B", "H", "?", "?", "d_k"), "strided-scores": ("B", "H", "?", "?", "?")},
         silent=("strided-scores",)),
]


test_names, test_verdict = corpus_tests(__name__, CASES)
