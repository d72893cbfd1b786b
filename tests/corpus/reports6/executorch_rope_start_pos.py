"""pytorch/executorch PR #2010 ("Fix a rotary position encoding bug in kv cache"): the example llama
``Transformer`` has two branches, with and without a KV cache; "for the branch that uses kv cache, we should
get the rotary position encoding by slicing the precomputed value by the ``start_pos: start_pos + seqlen``".
The cached branch sliced ``freqs_cos[:seqlen]``: every decoding step's new query and key were rotated as if
they stood at position 0 while the cache held the earlier keys at their true positions, and the causal mask
(sliced ``[start_pos:start_pos + seqlen]``) placed the step right.

executorch's llama idiom: ``precompute_freqs_cis`` as real ``freqs_cos``/``freqs_sin`` ``(max_seq_len, d/2)``
buffers, ``apply_rotary_emb`` on adjacent pairs (``reshape(... , -1, 2).unbind(-1)``, ``reshape_for_broadcast``
to ``(1, T, 1, d/2)``, ``stack([out_r, out_i], -1).flatten(3)``), ``wq``/``wk``/``wv``/``wo``, a ``KVCache``
of ``(B, max_seq_len, H, d)`` written at ``start_pos:start_pos + seqlen`` and read up to it, the causal mask
a ``(max_seq_len, max_seq_len)`` buffer of ``-inf`` above the diagonal sliced to the step. A prefill of T
tokens, then one decoding step.

Bug (argument): ``freqs-from-zero``: the cached branch slices the tables ``[:seqlen]``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("freqs-from-zero",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
MAX_SEQ_LEN = 16


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, dtype=freqs.dtype)
    freqs = torch.outer(t, freqs)                                               # (max_seq_len, d/2)
    return torch.cos(freqs), torch.sin(freqs)


def reshape_for_broadcast(freqs_cis, x):
    shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(shape)                                                # (1, T, 1, d/2)


def apply_rotary_emb(xq, xk, freqs_cos, freqs_sin):
    xq_r, xq_i = xq.float().reshape(xq.shape[:-1] + (-1, 2)).unbind(-1)         # (B, T, H, d/2)
    xk_r, xk_i = xk.float().reshape(xk.shape[:-1] + (-1, 2)).unbind(-1)
    freqs_cos = reshape_for_broadcast(freqs_cos, xq_r)
    freqs_sin = reshape_for_broadcast(freqs_sin, xq_r)
    xq_out_r = xq_r * freqs_cos - xq_i * freqs_sin
    xq_out_i = xq_r * freqs_sin + xq_i * freqs_cos
    xk_out_r = xk_r * freqs_cos - xk_i * freqs_sin
    xk_out_i = xk_r * freqs_sin + xk_i * freqs_cos
    xq_out = torch.stack([xq_out_r, xq_out_i], dim=-1).flatten(3)               # (B, T, H, d)
    xk_out = torch.stack([xk_out_r, xk_out_i], dim=-1).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, max_batch_size):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.register_buffer("k_cache", torch.zeros(max_batch_size, MAX_SEQ_LEN, n_heads, self.head_dim))
        self.register_buffer("v_cache", torch.zeros(max_batch_size, MAX_SEQ_LEN, n_heads, self.head_dim))
        self.register_buffer("mask", torch.triu(torch.full((MAX_SEQ_LEN, MAX_SEQ_LEN), float("-inf")), diagonal=1))

    def forward(self, x, freqs_cos, freqs_sin, start_pos):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)          # (B, T, H, d)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)
        self.k_cache[:bsz, start_pos:start_pos + seqlen] = xk
        self.v_cache[:bsz, start_pos:start_pos + seqlen] = xv
        keys = self.k_cache[:bsz, :start_pos + seqlen]                          # (B, P+T, H, d)
        values = self.v_cache[:bsz, :start_pos + seqlen]
        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)   # (B, H, T, P+T)
        scores = scores + self.mask[start_pos:start_pos + seqlen, :start_pos + seqlen]
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)   # (B, T, D)
        return self.wo(output)


class Transformer(nn.Module):
    def __init__(self, dim, n_heads, max_batch_size, bug=""):
        super().__init__()
        self.bug = bug
        self.attention = Attention(dim, n_heads, max_batch_size)
        freqs_cos, freqs_sin = precompute_freqs_cis(dim // n_heads, MAX_SEQ_LEN)
        self.register_buffer("freqs_cos", freqs_cos, persistent=False)
        self.register_buffer("freqs_sin", freqs_sin, persistent=False)

    def step(self, h, start_pos):
        seqlen = h.shape[1]
        if self.bug == "freqs-from-zero":
            freqs_cos, freqs_sin = self.freqs_cos[:seqlen], self.freqs_sin[:seqlen]                 # [freqs]
        else:
            freqs_cos = self.freqs_cos[start_pos:start_pos + seqlen]                                # [freqs]
            freqs_sin = self.freqs_sin[start_pos:start_pos + seqlen]
        return self.attention(h, freqs_cos, freqs_sin, start_pos)

    def forward(self, prompt, token):
        self.step(prompt, 0)                                     # prefill: T tokens at 0..T-1
        return self.step(token, prompt.shape[1])                 # one decoding step at position T


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Transformer(D, H, B, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
