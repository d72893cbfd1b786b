"""Bugs taken from public issue trackers, each next to its fix (issue 21, corpus): merges that mix
tokens, heads and batch entries; ``F.softmax`` without ``dim``; a [B, T, T] mask broadcast onto
[B, H, T, T] scores; ``torch.mm(q, k)`` without the transpose; and correct head splits written with
``swapaxes``/``movedim``."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

pytestmark = pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmax")

DIMS = "B=2 T=5 D=24 H=3"            # d_k = 8
SQUARE = "B=2 T=4 D=32 H=4"          # T == H, d_k = 8
B_EQ_H = "B=3 T=5 D=24 H=3"          # B == H: a [B, T, T] mask broadcasts onto [B, H, T, T]


class MHA(nn.Module):
    """The annotated-transformer/nanoGPT multi-head attention with a switch for each public slip."""

    def __init__(self, dim: int, heads: int, merge: str = "permute", softmax: str = "dim-1", split: str = "transpose"):
        super().__init__()
        self.heads, self.merge, self.softmax, self.split = heads, merge, softmax, split
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def heads_of(self, t):
        B, T, D = t.shape
        H, d = self.heads, D // self.heads
        if self.split == "swapaxes":
            return t.view(B, T, H, d).swapaxes(1, 2)                 # (B, H, T, d_k) [split-swapaxes]
        if self.split == "movedim":
            return t.view(B, T, H, d).movedim(2, 1)                   # (B, H, T, d_k) [split-movedim]
        return t.view(B, T, H, d).transpose(1, 2)                     # (B, H, T, d_k) [split]

    def forward(self, x, mask=None):
        B, T, D = x.shape
        d = D // self.heads
        q, k, v = self.heads_of(self.q_proj(x)), self.heads_of(self.k_proj(x)), self.heads_of(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)               # (B, H, T, T) [scores]
        if self.softmax == "implicit":
            weights = F.softmax(scores)                               # torch picks dim 1: H [bug-softmax]
        else:
            weights = F.softmax(scores, dim=-1)                       # (B, H, T, T) [weights]
        y = weights @ v                                               # (B, H, T, d_k) [y]
        if self.merge == "reshape":
            y = y.reshape(B, T, D)                                    # (B, ?, ?): heads and tokens mixed [bug-merge]
        else:
            y = y.permute(0, 2, 1, 3).reshape(B, T, D)                # (B, T, D) [merge]
        return self.o_proj(y)


class FlatHeads(nn.Module):
    """Heads folded into the batch, (B*H, T, d_k), B-major, as ``q.transpose(1, 2).reshape(B * H, T, d)``.

    ``unfold``:

    * ``"heads-batch"``: the output read back as ``view(H, B, T, d)`` then permuted as if it were
      (B, H, T, d) — gazelle93/Transformer-Various-Positional-Encoding#1 ("we're actually passing in
      [NH, B, T, HD], rather than [B, NH, T, HD]"): batch entries and heads are mixed;
    * ``"batch-heads"``: the fix, ``view(B, H, T, d)``.

    ``softmax="implicit"`` calls ``F.softmax(scores)`` on the 3-D scores: torch's legacy rule picks
    dim 0, the folded batch (the deprecation reports amdegroot/ssd.pytorch#114 and
    OpenNMT/OpenNMT-py#632 are this call).
    """

    def __init__(self, dim: int, heads: int, unfold: str = "batch-heads", softmax: str = "dim-1"):
        super().__init__()
        self.heads, self.unfold, self.softmax = heads, unfold, softmax
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        q, k, v = (t.view(B, T, H, d).transpose(1, 2).reshape(B * H, T, d) for t in self.qkv(x).chunk(3, dim=-1))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)       # (B*H, T, T) [flat-scores]
        if self.softmax == "implicit":
            weights = F.softmax(scores)                               # torch picks dim 0: B*H [bug-softmax]
        else:
            weights = F.softmax(scores, dim=-1)                       # (B*H, T, T)
        out = torch.bmm(weights, v)                                   # (B*H, T, d_k) [flat-out]
        if self.unfold == "heads-batch":
            out = out.view(H, B, T, d)                                # (H?, B?, T, d_k): mixed [bug-flat-view]
        else:
            out = out.view(B, H, T, d)                                # (B, H, T, d_k) [flat-view]
        return out.permute(0, 2, 1, 3).contiguous().view(B, T, D)     # (B, T, D) [flat-merge]


class HeadsFirstBuffer(nn.Module):
    """hackiey/QAnet-pytorch (issue #2): per-head outputs written into a (H, B, T, d) buffer, then
    ``heads.view(batch_size, l, -1)``; the fix from the issue is ``heads.permute(1, 2, 0, 3)
    .contiguous().view(batch_size, l, -1)``. With one head it never showed."""

    def __init__(self, dim: int, heads: int, permute: bool):
        super().__init__()
        self.heads, self.permute = heads, permute
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        q = self.q_proj(x).view(B, T, H, d).permute(2, 0, 1, 3)       # (H, B, T, d_k) [qanet-q]
        k = self.k_proj(x).view(B, T, H, d).permute(2, 0, 1, 3)       # (H, B, T, d_k)
        v = self.v_proj(x).view(B, T, H, d).permute(2, 0, 1, 3)       # (H, B, T, d_k)
        heads = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v  # (H, B, T, d_k) [qanet-heads]
        if self.permute:
            return heads.permute(1, 2, 0, 3).contiguous().view(B, T, -1)  # (B, T, D) [qanet-merge]
        return heads.view(B, T, -1)                                   # (B?, T?, ?): mixed [bug-qanet-view]


class PaddingMaskAttention(MHA):
    """hyunwoongko/transformer ``ScaleDotProductAttention``: ``score.masked_fill(mask == 0, -10000)`` with
    scores (B, H, T, T). Issue #32 asks what happens when the mask is (B, T, T): broadcasting lines
    its B up with H, which runs silently when B == H (each head gets another sentence's padding). The
    fix gives the mask a head axis: ``mask.unsqueeze(1)``."""

    def __init__(self, dim: int, heads: int, unsqueeze: bool):
        super().__init__(dim, heads)
        self.unsqueeze = unsqueeze

    def forward(self, x, keep):
        B, T, D = x.shape
        q, k, v = self.heads_of(self.q_proj(x)), self.heads_of(self.k_proj(x)), self.heads_of(self.v_proj(x))
        score = q @ k.transpose(2, 3) / math.sqrt(D // self.heads)     # (B, H, T, T)
        mask = keep[:, None, :] & keep[:, :, None]                    # (B, T, T)
        if self.unsqueeze:
            score = score.masked_fill(mask.unsqueeze(1) == 0, -10000)  # (B, H, T, T) [pad-scores]
        else:
            score = score.masked_fill(mask == 0, -10000)              # B lined up with H [bug-pad-mask]
        return self.o_proj((score.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D))


class SingleHeadMM(nn.Module):
    """One head over one sequence with ``torch.mm``: spro/practical-pytorch#135 (``hidden.mm(energy)``
    needs ``energy.transpose(0, 1)``) and nsidn98/InforMARL#22 ("why ... not transposed for one of
    them"). Without the transpose it runs only when T == D, and then sums over tokens against
    features."""

    def __init__(self, dim: int, transpose: bool):
        super().__init__()
        self.transpose = transpose
        self.query, self.key, self.value = (nn.Linear(dim, dim, bias=False) for _ in range(3))

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)           # (T, D) x 3
        if self.transpose:
            scores = torch.mm(q, k.t())                               # (T, T) [mm-scores]
        else:
            scores = torch.mm(q, k)                                   # (T, D?): D summed with T [bug-mm]
        return torch.mm(F.softmax(scores, dim=-1), v)                 # (T, D)


class MatmulNoTranspose(MHA):
    """The 4-D version: ``q @ k`` with q, k (B, H, T, d_k) and T == d_k (transformer-from-scratch
    write-ups; the matmul the issue says is caught where ``mm`` is not)."""

    def forward(self, x, mask=None):
        B, T, D = x.shape
        q, k, v = self.heads_of(self.q_proj(x)), self.heads_of(self.k_proj(x)), self.heads_of(self.v_proj(x))
        scores = q @ k / math.sqrt(D // self.heads)                   # (B, H, T, T?): d_k summed with T [bug-matmul]
        return self.o_proj((scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D))


class SingleSequenceSoftmax(nn.Module):
    """Attention over one sequence, one head, 2-D scores (T, T) with ``F.softmax(scores)``: the legacy
    rule picks dim 1 for 2-D input, the keys, so this old spelling is right (the 4-D and 3-D calls
    above are not)."""

    def __init__(self, dim: int):
        super().__init__()
        self.query, self.key = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        scores = self.query(x) @ self.key(x).t()                      # (T, T) [single-scores]
        return F.softmax(scores) @ x                                  # (T, D): softmax over dim 1, the keys


def build(model_class, B: int = 2, T: int = 5, D: int = 24, keep: bool = False, **kwargs):
    def make():
        model = model_class(**kwargs).eval()
        x = torch.randn(B, T, D)
        if not keep:
            return model, (x,)
        keep_mask = torch.ones(B, T, dtype=torch.bool)                # (B, T): False at padding
        keep_mask[-1, T - 2:] = False
        return model, (x, keep_mask)
    return make


def build_2d(model_class, T: int, D: int, **kwargs):
    def make():
        return model_class(D, **kwargs).eval(), (torch.randn(T, D),)
    return make


PER_HEAD = ("B", "H", "T", "d_k")
NO_IMPLICIT_DIM = ("F.softmax without dim is recorded with dim None and not checked (torch picks dim 1 for 4-D, "
                   "0 for 3-D)")

CASES = [
    Case("merge-heads-reshape-without-permute", DIMS, build(MHA, dim=24, heads=3, merge="reshape"),
         bug=("bug-merge",)),
    Case("merge-heads-reshape-without-permute-T-eq-H", SQUARE, build(MHA, T=4, D=32, dim=32, heads=4, merge="reshape"),
         bug=("bug-merge",)),
    Case("merge-heads-permute-then-reshape", DIMS, build(MHA, dim=24, heads=3),
         heads={"split": PER_HEAD, "scores": ("B", "H", "T", "T"), "y": PER_HEAD, "merge": ("B", "T", "D")}),
    Case("merge-heads-permute-then-reshape-T-eq-H", SQUARE, build(MHA, T=4, D=32, dim=32, heads=4),
         heads={"split": PER_HEAD, "y": PER_HEAD, "merge": ("B", "T", "D")}),
    Case("heads-folded-in-batch-read-back-heads-first", DIMS, build(FlatHeads, dim=24, heads=3, unfold="heads-batch"),
         bug=("bug-flat-view",)),
    Case("heads-folded-in-batch-read-back-batch-first", DIMS, build(FlatHeads, dim=24, heads=3),
         heads={"flat-scores": ("B*H", "T", "T"), "flat-out": ("B*H", "T", "d_k"), "flat-view": PER_HEAD,
                "flat-merge": ("B", "T", "D")}),
    Case("qanet-heads-first-buffer-viewed-batch-first", DIMS, build(HeadsFirstBuffer, dim=24, heads=3, permute=False),
         bug=("bug-qanet-view",)),
    Case("qanet-heads-first-buffer-permuted", DIMS, build(HeadsFirstBuffer, dim=24, heads=3, permute=True),
         heads={"qanet-q": ("H", "B", "T", "d_k"), "qanet-heads": ("H", "B", "T", "d_k"),
                "qanet-merge": ("B", "T", "D")}),
    Case("softmax-without-dim-on-4d-scores", DIMS, build(MHA, dim=24, heads=3, softmax="implicit"),
         bug=("bug-softmax",)),
    Case("softmax-without-dim-on-3d-scores", DIMS, build(FlatHeads, dim=24, heads=3, softmax="implicit"),
         bug=("bug-softmax",)),
    Case("softmax-without-dim-on-2d-scores", "T=5 D=24", build_2d(SingleSequenceSoftmax, T=5, D=24),
         heads={"single-scores": ("T", "T")}, names=("T D",)),
    Case("softmax-dim-minus-1-on-4d-scores", DIMS, build(MHA, dim=24, heads=3),
         heads={"weights": ("B", "H", "T", "T")}),
    Case("mask-b-t-t-broadcast-onto-b-h-t-t", B_EQ_H, build(PaddingMaskAttention, B=3, keep=True, dim=24, heads=3,
                                                           unsqueeze=False),
         bug=("bug-pad-mask",)),
    Case("mask-unsqueezed-onto-b-h-t-t", B_EQ_H, build(PaddingMaskAttention, B=3, keep=True, dim=24, heads=3,
                                                       unsqueeze=True),
         heads={"pad-scores": ("B", "H", "T", "T")}),
    Case("mm-query-key-without-transpose", "T=8 D=8", build_2d(SingleHeadMM, T=8, D=8, transpose=False),
         bug=("bug-mm",), names=("T D",)),
    Case("mm-query-key-transposed", "T=8 D=8", build_2d(SingleHeadMM, T=8, D=8, transpose=True),
         heads={"mm-scores": ("T", "T")}, names=("T D",)),
    Case("matmul-query-key-without-transpose-T-eq-d_k", "B=2 T=8 D=24 H=3",
         build(MatmulNoTranspose, T=8, dim=24, heads=3), bug=("bug-matmul",)),
    Case("matmul-query-key-transposed-T-eq-d_k", "B=2 T=8 D=24 H=3", build(MHA, T=8, dim=24, heads=3),
         heads={"scores": ("B", "H", "T", "T"), "merge": ("B", "T", "D")}),
    Case("head-split-with-swapaxes", DIMS, build(MHA, dim=24, heads=3, split="swapaxes"),
         heads={"split-swapaxes": PER_HEAD, "scores": ("B", "H", "T", "T"), "merge": ("B", "T", "D")}),
    Case("head-split-with-movedim", DIMS, build(MHA, dim=24, heads=3, split="movedim"),
         heads={"split-movedim": PER_HEAD, "scores": ("B", "H", "T", "T"), "merge": ("B", "T", "D")}),
]


test_names, test_verdict = corpus_tests(__name__, CASES)
