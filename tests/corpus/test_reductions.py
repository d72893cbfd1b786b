"""Reductions and normalisations read against the role of the axis they run along (issue 33 item 4):
a ``mean``, ``sum``, ``logsumexp``, ``F.normalize`` or RMS over the heads or the batch of what
attention computes per head is a finding; the same ops over keys, features or (after the attention)
tokens, a loss over the batch, and a mean over heads of weights returned for display are not.

Each case runs at distinct sizes and at equal ones (B = T = H = d_k = 4): the axis comes from the
recorded ``dim`` and the names, never from sizes.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=5 D=24 H=3"            # d_k = 8
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4


class NanoGPTAttention(nn.Module):
    """karpathy/nanoGPT model.py ``CausalSelfAttention`` (the manual path, without dropout), with one
    line changed per bug:

    * ``reduce="mean-weights"``: the weights averaged over the heads before they weigh the values, as
      torch's ``F.multi_head_attention_forward`` averages them for display (``attn_output_weights.mean
      (dim=1)`` with ``average_attn_weights=True``), here fed back into ``att @ v``;
    * ``reduce="sum-heads"``: the heads' outputs summed (``y.sum(dim=1)``) instead of laid side by side
      by ``y.transpose(1, 2).contiguous().view(B, T, C)``; the output projection then takes hs features;
    * ``reduce="logsumexp-heads"``: the softmax written as ``exp(att - att.logsumexp(...))`` with the
      dim of the heads.
    """

    def __init__(self, n_embd: int, n_head: int, reduce: str = ""):
        super().__init__()
        self.n_head, self.reduce = n_head, reduce
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        width = n_embd // n_head if reduce == "sum-heads" else n_embd
        self.c_proj = nn.Linear(width, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        if self.reduce == "logsumexp-heads":
            att = (att - att.logsumexp(dim=1, keepdim=True)).exp()      # (B, nh, T, T) [bug-lse-heads]
        else:
            att = F.softmax(att, dim=-1)                                # (B, nh, T, T) [gpt-softmax]
        if self.reduce == "mean-weights":
            att = att.mean(dim=1, keepdim=True)                         # (B, 1, T, T) [bug-mean-weights]
        y = att @ v                                                     # (B, nh, T, hs) [gpt-y]
        if self.reduce == "sum-heads":
            y = y.sum(dim=1)                                            # (B, T, hs) [bug-sum-heads]
        else:
            y = y.transpose(1, 2).contiguous().view(B, T, C)            # (B, T, C) [gpt-merge]
        return self.c_proj(y)                                           # (B, T, C)


class LlamaBlock(nn.Module):
    """huggingface/transformers Llama: ``LlamaRMSNorm`` over the features (``hidden_states.pow(2).mean
    (-1, keepdim=True)``), attention, and a per-head RMS norm of the queries and keys as Qwen3's
    ``q_norm``/``k_norm`` apply it (over head_dim). With ``qk_norm_dim=1`` the per-head norm is taken
    over axis 1 of q laid out (B, H, T, d_k): the heads. A training loss ``mean()`` over everything
    (batch included) follows, as in a training step."""

    def __init__(self, dim: int, heads: int, qk_norm_dim: int = -1):
        super().__init__()
        self.heads, self.qk_norm_dim = heads, qk_norm_dim
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    @staticmethod
    def rms_norm(x, dim=-1, eps=1e-6):
        variance = x.pow(2).mean(dim, keepdim=True)                     # [rms-mean]
        return x * torch.rsqrt(variance + eps)

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        h = self.rms_norm(x)                                            # (B, T, D)
        q = self.q_proj(h).view(B, T, H, d).transpose(1, 2)             # (B, H, T, d_k)
        k = self.k_proj(h).view(B, T, H, d).transpose(1, 2)             # (B, H, T, d_k)
        v = self.v_proj(h).view(B, T, H, d).transpose(1, 2)             # (B, H, T, d_k)
        q = self.rms_norm(q, self.qk_norm_dim)                          # (B, H, T, d_k)
        k = self.rms_norm(k, self.qk_norm_dim)                          # (B, H, T, d_k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)     # (B, H, T, d_k)
        out = self.o_proj(y.transpose(1, 2).reshape(B, T, D))           # (B, T, D)
        return out, (out ** 2).mean()                                   # [loss-mean]


class SwinV2CosineAttention(nn.Module):
    """microsoft/Swin-Transformer swin_transformer_v2.py ``WindowAttention``: cosine attention,
    ``F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)`` scaled by a learnt
    temperature. ``default_dim=True`` calls ``F.normalize(q)`` without ``dim``: torch's default
    ``dim=1`` is the heads of (B_, nH, N, C)."""

    def __init__(self, dim: int, heads: int, default_dim: bool = False):
        super().__init__()
        self.heads, self.default_dim = heads, default_dim
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))

    def forward(self, x):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.heads, -1).permute(2, 0, 3, 1, 4)  # (3, B_, nH, N, d)
        q, k, v = qkv[0], qkv[1], qkv[2]                                # (B_, nH, N, d) each
        if self.default_dim:
            qn, kn = F.normalize(q), F.normalize(k)                     # (B_, nH, N, d) [bug-normalize]
        else:
            qn, kn = F.normalize(q, dim=-1), F.normalize(k, dim=-1)     # (B_, nH, N, d) [swin-normalize]
        attn = qn @ kn.transpose(-2, -1)                                # (B_, nH, N, N)
        attn = attn * torch.clamp(self.logit_scale, max=math.log(100.0)).exp()
        attn = attn.softmax(dim=-1)                                     # (B_, nH, N, N)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)                # (B_, N, C)
        return self.proj(x)


class LinearAttention(nn.Module):
    """idiap/fast-transformers ``LinearAttention.forward``: feature maps φ(q), φ(k) (elu + 1),
    ``KV = einsum("nshd,nshm->nhmd", K, V)`` and the normaliser ``Z = 1 / einsum("nlhd,nhd->nlh", Q,
    K.sum(dim=1))``: a sum over the keys' tokens. With ``sum_dim=0`` the sum runs over the batch (the
    axis a seq-first (S, N, H, D) layout would have had tokens on): it runs only when N == S."""

    def __init__(self, dim: int, heads: int, sum_dim: int = 1):
        super().__init__()
        self.heads, self.sum_dim = heads, sum_dim
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        N, L, D = x.shape
        H = self.heads
        Q = F.elu(self.q(x).view(N, L, H, D // H)) + 1                  # (N, L, H, d)
        K = F.elu(self.k(x).view(N, L, H, D // H)) + 1                  # (N, S, H, d)
        V = self.v(x).view(N, L, H, D // H)                             # (N, S, H, d)
        KV = torch.einsum("nshd,nshm->nhmd", K, V)                      # (N, H, d, d)
        Ksum = K.sum(dim=self.sum_dim)                                  # (N, H, d) [ksum]
        Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, Ksum) + 1e-6)         # (N, L, H)
        out = torch.einsum("nlhd,nhmd,nlh->nlhm", Q, KV, Z)             # (N, L, H, d)
        return out.reshape(N, L, D)                                     # (N, L, D)


def vit_rollout(x, heads: int):
    """jacobgil/vit-explain vit_rollout.py: the attention of each layer averaged over the heads
    (``attention.mean(axis=1)``), plus the identity, renormalised and multiplied through the layers: an
    explanation, read from the weights, that weighs no values. Then timm's ``global_pool='avg'``
    (``x.mean(dim=1)``): pooling over the tokens after the attention."""
    B, T, D = x.shape
    q = x.view(B, T, heads, D // heads).transpose(1, 2)                 # (B, H, T, d_k)
    att = (q @ q.transpose(-2, -1) / math.sqrt(D // heads)).softmax(-1)  # (B, H, T, T)
    fused = att.mean(dim=1)                                             # (B, T, T) [rollout-mean]
    a = (fused + torch.eye(T)) / 2                                      # (B, T, T)
    a = a / a.sum(dim=-1, keepdim=True)                                 # (B, T, T)
    result = a @ a                                                      # (B, T, T) [rollout]
    y = (att @ q).transpose(1, 2).reshape(B, T, D)                      # (B, T, D)
    return y.mean(dim=1), result                                        # (B, D) [pool]


def module(make_model, dims: str, **kwargs):
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")

    def make():
        return make_model(D, H, **kwargs).eval(), (torch.randn(B, T, D),)
    return make


def function(fn, dims: str):
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")

    def make():
        return (lambda x: fn(x, H)), (torch.randn(B, T, D),)
    return make


def mha_weights(dims: str):
    """torch ``nn.MultiheadAttention(batch_first=True)`` called with ``need_weights=True`` and its
    default ``average_attn_weights=True``: the weights it returns are a mean over the heads, taken after
    the output is computed (for display), never fed back."""
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")

    def make():
        mha = nn.MultiheadAttention(D, H, batch_first=True).eval()
        return (lambda x: mha(x, x, x, need_weights=True)), (torch.randn(B, T, D),)
    return make


CASES = []
for size_id, dims in (("", DIMS), ("-equal-sizes", SQUARE)):
    CASES += [
        Case("nanogpt" + size_id, dims, module(NanoGPTAttention, dims), silent=("gpt-softmax", "gpt-merge")),
        Case("nanogpt-weights-averaged-over-heads" + size_id, dims,
             module(NanoGPTAttention, dims, reduce="mean-weights"), bug=("bug-mean-weights",)),
        Case("nanogpt-heads-summed-not-merged" + size_id, dims,
             module(NanoGPTAttention, dims, reduce="sum-heads"), bug=("bug-sum-heads",)),
        Case("nanogpt-logsumexp-over-heads" + size_id, dims,
             module(NanoGPTAttention, dims, reduce="logsumexp-heads"), bug=("bug-lse-heads",)),
        Case("llama-rmsnorm-qk-norm-loss" + size_id, dims, module(LlamaBlock, dims),
             heads={"rms-mean": ("B", "H", "T", "_")}, silent=("rms-mean", "loss-mean")),
        Case("qk-norm-over-heads" + size_id, dims, module(LlamaBlock, dims, qk_norm_dim=1), bug=("rms-mean",)),
        Case("swin-v2-cosine" + size_id, dims, module(SwinV2CosineAttention, dims), silent=("swin-normalize",)),
        Case("swin-v2-normalize-default-dim" + size_id, dims,
             module(SwinV2CosineAttention, dims, default_dim=True), bug=("bug-normalize",)),
        Case("fast-transformers-linear" + size_id, dims, module(LinearAttention, dims), silent=("ksum",)),
        Case("vit-rollout-and-pooling" + size_id, dims, function(vit_rollout, dims),
             silent=("rollout-mean", "rollout", "pool")),
        Case("mha-average-attn-weights" + size_id, dims, mha_weights(dims)),
    ]
# the seq-first sum runs only when the batch and the tokens have one size: a sum over axis 0 of a [4, 4, 16]
# input is over the batch read [B, T, D] and over the keys read [T, B, D] (fast-transformers' own sum is over
# the keys); read [T, B, D], though, the einsum "nshd,nshm->nhmd" sums the values over the batch, so every
# reading finds a bug (shapetrace/engine/readings.py keeps the batch-first one, saying its names rest on the
# order): an error since the eighth public round, whose einsum rule sums over heads or batch of per-head values
CASES.append(Case("fast-transformers-sum-over-batch-equal-sizes", SQUARE,
                  module(LinearAttention, SQUARE, sum_dim=0), bug=("ksum",)))

test_names, test_verdict = corpus_tests(__name__, CASES)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_the_message_names_the_op_the_axis_and_its_role(dims):
    """The finding on nanoGPT with the weights averaged over heads, word for word."""
    from tests.corpus.helpers import trace_case, without_order_caveat
    t = trace_case(Case("x", dims, module(NanoGPTAttention, dims, reduce="mean-weights")))
    found = [d for d in t.diagnostics if d.kind == "reduction-over-wrong-axis"]
    assert len(found) == 1
    e = t.events[found[0].event]
    B, H, T = (t.dims[k] for k in "BHT")
    later = next(x for x in t.events if x.index > e.index and x.op == "matmul")
    assert without_order_caveat(found[0].message, B == T) == (
        f"mean #{e.index} runs along axis 1 (H, the heads) of the attention scores [B={B}, H={H}, T={T}, T={T}], "
        f"and matmul #{later.index} weighs the values with the result: the {H} heads share one set of weights, "
        "so they are no longer apart.")
    assert found[0].severity == "error"
    assert t.report().verdict.mark == "✗"
