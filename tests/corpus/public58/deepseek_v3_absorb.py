"""deepseek-ai/DeepSeek-V3, inference/model.py (``MLA.forward`` with ``attn_impl = "absorb"``, ``apply_rotary_emb``,
``precompute_freqs_cis`` without YaRN, ``Transformer.forward``; https://github.com/deepseek-ai/DeepSeek-V3): the
reference inference of multi-head latent attention with the up-projection absorbed. Queries ``wq_b(q_norm(wq_a(x)))``
viewed ``(bsz, seqlen, n_heads, qk_head_dim)`` and split into ``q_nope``/``q_pe``; ``wkv_a`` gives the latent ``kv``
and one shared ``k_pe``; rotary on complex pairs (``view_as_complex(x.view(..., -1, 2))``, ``freqs_cis.view(1,
seqlen, 1, -1)``); ``wkv_b.weight.view(n_heads, -1, kv_lora_rank)`` absorbed into the queries
(``einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :qk_nope_head_dim])``); the caches ``kv_cache[:bsz,
start_pos:end_pos] = kv_norm(kv)`` and ``pe_cache[...] = k_pe.squeeze(2)``; scores ``einsum("bshc,btc->bsht")`` plus
``einsum("bshr,btr->bsht")`` times ``softmax_scale``, ``+= mask.unsqueeze(1)`` (the mask ``full((seqlen, seqlen),
-inf).triu_(1)``, only when ``seqlen > 1``), ``softmax(dim=-1, dtype=float32)``, ``einsum("bsht,btc->bshc")`` with
the latent cache, then ``einsum("bshc,hdc->bshd", x, wkv_b[:, -v_head_dim:])`` and ``wo(x.flatten(2))``. The
``Transformer`` picks ``freqs_cis[start_pos:start_pos + seqlen]``. A prompt of T tokens, then one decoded token.

Bugs (the decode step): ``decode-freqs-from-zero``: ``freqs_cis[:seqlen]`` (the new token rotated as position 0,
its key cached there too: the cache offset forgotten in the rotary pick); ``decode-cache-write-at-zero``: the caches
written at ``[:bsz, :seqlen]`` (``start_pos`` dropped from the write: the step overwrites the first prompt token's
latent and reads an unwritten zero slot at ``end_pos - 1``); ``value-rows-front``: the output projected with
``wkv_b[:, :v_head_dim]`` (the key rows of ``wkv_b``, equal in size to the value rows since ``qk_nope_head_dim ==
v_head_dim``: a slice slip)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def precompute_freqs_cis(dim, seqlen, base=10000.0):
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(seqlen), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)                                 # (max_seq_len, rope/2)


def apply_rotary_emb(x, freqs_cis):
    dtype = x.dtype
    x = torch.view_as_complex(x.float().view(*x.shape[:-1], -1, 2))                   # (bsz, seqlen, h, rope/2)
    freqs_cis = freqs_cis.view(1, x.size(1), 1, x.size(-1))
    return torch.view_as_real(x * freqs_cis).flatten(3).to(dtype)                     # (bsz, seqlen, h, rope)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.dim, self.eps, self.weight = dim, eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (self.dim,), self.weight, self.eps)


class MLA(nn.Module):
    def __init__(self, dim, n_heads, q_lora_rank, kv_lora_rank, nope, rope, v_head_dim, max_batch, max_seq, bug=""):
        super().__init__()
        self.n_local_heads, self.kv_lora_rank, self.bug = n_heads, kv_lora_rank, bug
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = nope, rope, v_head_dim
        self.qk_head_dim = nope + rope
        self.wq_a, self.q_norm = nn.Linear(dim, q_lora_rank, bias=False), RMSNorm(q_lora_rank)
        self.wq_b = nn.Linear(q_lora_rank, n_heads * self.qk_head_dim, bias=False)
        self.wkv_a = nn.Linear(dim, kv_lora_rank + rope, bias=False)
        self.kv_norm = RMSNorm(kv_lora_rank)
        self.wkv_b = nn.Linear(kv_lora_rank, n_heads * (nope + v_head_dim), bias=False)
        self.wo = nn.Linear(n_heads * v_head_dim, dim, bias=False)
        self.softmax_scale = self.qk_head_dim ** -0.5
        self.register_buffer("kv_cache", torch.zeros(max_batch, max_seq, kv_lora_rank), persistent=False)
        self.register_buffer("pe_cache", torch.zeros(max_batch, max_seq, rope), persistent=False)

    def forward(self, x, start_pos, freqs_cis, mask):
        bsz, seqlen, _ = x.size()
        end_pos = start_pos + seqlen
        q = self.wq_b(self.q_norm(self.wq_a(x)))
        q = q.view(bsz, seqlen, self.n_local_heads, self.qk_head_dim)                 # (bsz, seqlen, h, nope+rope)
        q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        q_pe = apply_rotary_emb(q_pe, freqs_cis)
        kv = self.wkv_a(x)
        kv, k_pe = torch.split(kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        k_pe = apply_rotary_emb(k_pe.unsqueeze(2), freqs_cis)                         # (bsz, seqlen, 1, rope)
        wkv_b = self.wkv_b.weight.view(self.n_local_heads, -1, self.kv_lora_rank)      # (h, nope+v, c)
        q_nope = torch.einsum("bshd,hdc->bshc", q_nope, wkv_b[:, :self.qk_nope_head_dim])
        first = 0 if self.bug == "decode-cache-write-at-zero" else start_pos
        self.kv_cache[:bsz, first:first + seqlen] = self.kv_norm(kv)
        self.pe_cache[:bsz, first:first + seqlen] = k_pe.squeeze(2)
        scores = (torch.einsum("bshc,btc->bsht", q_nope, self.kv_cache[:bsz, :end_pos]) +
                  torch.einsum("bshr,btr->bsht", q_pe, self.pe_cache[:bsz, :end_pos])) * self.softmax_scale
        if mask is not None:
            scores += mask.unsqueeze(1)                                               # (seqlen, 1, end_pos)
        scores = scores.softmax(dim=-1, dtype=torch.float32).type_as(x)               # (bsz, seqlen, h, end_pos)
        x = torch.einsum("bsht,btc->bshc", scores, self.kv_cache[:bsz, :end_pos])     # (bsz, seqlen, h, c)
        rows = wkv_b[:, :self.v_head_dim] if self.bug == "value-rows-front" else wkv_b[:, -self.v_head_dim:]
        x = torch.einsum("bshc,hdc->bshd", x, rows)                                   # (bsz, seqlen, h, v)
        return self.wo(x.flatten(2))                                                  # (bsz, seqlen, dim)


class Transformer(nn.Module):
    def __init__(self, dim, n_heads, max_batch, max_seq_len=16, bug=""):
        super().__init__()
        self.bug = bug
        self.attn_norm = RMSNorm(dim)
        self.attn = MLA(dim, n_heads, 24, 16, 8, 4, 8, max_batch, max_seq_len, bug)
        self.register_buffer("freqs_cis", precompute_freqs_cis(4, max_seq_len), persistent=False)

    def step(self, h, start_pos):
        seqlen = h.size(1)
        first = 0 if self.bug == "decode-freqs-from-zero" else start_pos
        freqs_cis = self.freqs_cis[first:first + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf")).triu_(1)
        return h + self.attn(self.attn_norm(h), start_pos, freqs_cis, mask)

    def forward(self, prompt, token):                                                 # (B, T, D), (B, 1, D)
        self.step(prompt, 0)
        return self.step(token, prompt.size(1))                                       # (B, 1, D)


BUGS = ("decode-freqs-from-zero", "decode-cache-write-at-zero", "value-rows-front")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    return Transformer(D, H, max_batch=B, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
