"""Decoding with caches: GPT-2's legacy tuple cache, a static cache written by ``index_copy_``, by
indexed and by sliced assignment into a preallocated buffer, a one-token decode step, and DeepSeek's
latent attention (MLA) with its low-rank K/V (issue 21, corpus).

Every model here reads token ids, so ``dims`` seed the ids ``[B, T]``; a decode step reads the id
picked from the last position's logits (``logits[:, -1:]``), so its sequence axis comes from T.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=5 D=24 H=3"           # d_k = 8
VOCAB, MAX_LEN = 11, 10


def next_ids(logits):
    """Greedy pick from the last position: (B, T, V) -> (B, 1)."""
    return logits[:, -1:].argmax(dim=-1)                              # (B, T[-1:])


class LM(nn.Module):
    """Token and position embeddings, one attention layer, a vocabulary head."""

    def __init__(self, attn: nn.Module, dim: int = 24):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, dim), nn.Embedding(MAX_LEN, dim)
        self.attn = attn
        self.lm_head = nn.Linear(dim, VOCAB, bias=False)

    def forward(self, ids, cache, start: int):
        positions = torch.arange(start, start + ids.shape[1])
        x = self.wte(ids) + self.wpe(positions)                        # (B, T, D)
        y, cache = self.attn(x, cache, start)
        return self.lm_head(x + y), cache


def generate(model, ids, steps: int = 1):
    """A prefill over the prompt, then ``steps`` one-token decode steps with the cache."""
    logits, cache = model(ids, None, 0)
    start = ids.shape[1]
    for _ in range(steps):
        logits, cache = model(next_ids(logits), cache, start)
        start += 1
    return logits


# -- GPT-2's legacy tuple cache ----------------------------------------------------------------------

class GPT2LegacyAttention(nn.Module):
    """huggingface/transformers GPT-2 ``Attention`` before the Cache classes: ``split_heads(key,
    k=True)`` lays keys out as (B, H, d_k, T), ``layer_past`` holds them transposed back, and the new
    key is joined with ``torch.cat((past_key, key), dim=-1)``. With ``transpose_back=False`` the past
    key is used as stored, (B, H, T, d_k): the cat then lines up T with d_k (equal sizes here) — the
    transpose in question in huggingface/transformers#9727."""

    def __init__(self, dim: int = 24, heads: int = 3, transpose_back: bool = True):
        super().__init__()
        self.heads, self.dim, self.transpose_back = heads, dim, transpose_back
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(MAX_LEN, MAX_LEN)).view(1, 1, MAX_LEN, MAX_LEN))

    def forward(self, x, layer_past, start):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        query, key, value = self.c_attn(x).split(self.dim, dim=2)
        query = query.view(B, T, H, d).permute(0, 2, 1, 3)            # (B, H, T, d_k) [gpt2-q]
        key = key.view(B, T, H, d).permute(0, 2, 3, 1)                # (B, H, d_k, T) [gpt2-k]
        value = value.view(B, T, H, d).permute(0, 2, 1, 3)            # (B, H, T, d_k)
        if layer_past is not None:
            past_key = layer_past[0].transpose(-2, -1) if self.transpose_back else layer_past[0]
            key = torch.cat((past_key, key), dim=-1)                  # (B, H, d_k, T+1) [gpt2-cat-k]
            value = torch.cat((layer_past[1], value), dim=-2)         # (B, H, T+1, d_k) [gpt2-cat-v]
        present = (key.transpose(-2, -1), value)
        w = torch.matmul(query, key) / math.sqrt(d)                   # (B, H, T, T+1) [gpt2-scores]
        nd, ns = w.size(-2), w.size(-1)
        b = self.bias[:, :, ns - nd:ns, :ns]
        w = torch.softmax(w * b - 1e4 * (1 - b), dim=-1)
        a = torch.matmul(w, value)                                    # (B, H, T, d_k) [gpt2-a]
        a = a.permute(0, 2, 1, 3).contiguous().view(B, T, D)          # (B, T, D) [gpt2-merge]
        return self.c_proj(a), present


class GPT2LegacyKeyNotTransposedBack(GPT2LegacyAttention):
    """The same attention with the past key used as stored (no ``transpose(-2, -1)`` back)."""

    def __init__(self):
        super().__init__(transpose_back=False)

    def forward(self, x, layer_past, start):
        if layer_past is None:
            return super().forward(x, None, start)
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        query, key, value = self.c_attn(x).split(self.dim, dim=2)
        query = query.view(B, T, H, d).permute(0, 2, 1, 3)            # (B, H, T, d_k)
        key = key.view(B, T, H, d).permute(0, 2, 3, 1)                # (B, H, d_k, T)
        value = value.view(B, T, H, d).permute(0, 2, 1, 3)            # (B, H, T, d_k)
        key = torch.cat((layer_past[0], key), dim=-1)                 # (B, H, T?, d_k+1?) [bug-gpt2-cat]
        value = torch.cat((layer_past[1], value), dim=-2)             # (B, H, T+1, d_k)
        w = torch.softmax(torch.matmul(query, key) / math.sqrt(d), dim=-1)
        a = torch.matmul(w, value).permute(0, 2, 1, 3).contiguous().view(B, T, D)
        return self.c_proj(a), (key.transpose(-2, -1), value)


# -- static caches -----------------------------------------------------------------------------------

class StaticCacheAttention(nn.Module):
    """Llama-style projections and a static cache preallocated with ``new_zeros`` (B, H, MAX_LEN, d_k).

    ``write`` picks how the new keys land in it, each from public code:

    * ``index_copy``: huggingface/transformers ``StaticCache.update`` (``k_out.index_copy_(2,
      cache_position, key_states)``);
    * ``setitem``: the same method's fallback ``k_out[:, :, cache_position] = key_states``;
    * ``slice``: ``k_out[:, :, start:end] = key_states`` (karpathy/nanochat ``KVCache.insert_kv``).

    With ``transpose=False`` the prefill writes keys still laid out (B, T, H, d_k): with T == H the
    shapes agree and the cache's token axis receives heads (the missing transpose of
    reczoo/FuxiCTR#30, moved into a cache write).
    """

    def __init__(self, dim: int = 24, heads: int = 3, write: str = "index_copy", transpose: bool = True):
        super().__init__()
        self.heads, self.write, self.transpose = heads, write, transpose
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def forward(self, x, cache, start):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        q = self.q_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k) [static-q]
        k = self.k_proj(x).view(B, T, H, d)                           # (B, T, H, d_k)
        v = self.v_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        if self.transpose:
            k = k.transpose(1, 2)                                     # (B, H, T, d_k)
        if cache is None:
            cache = (x.new_zeros(B, H, MAX_LEN, d), x.new_zeros(B, H, MAX_LEN, d))  # (B, H, MAX_LEN, d_k) x 2
        k_cache, v_cache = cache
        end = start + T
        if self.write == "index_copy":
            position = torch.arange(start, end)
            k_cache.index_copy_(2, position, k)                       # (B, H, MAX_LEN, d_k) [static-write]
            v_cache.index_copy_(2, position, v)
        elif self.write == "setitem":
            position = torch.arange(start, end)
            k_cache[:, :, position] = k                               # (B, H, MAX_LEN, d_k) [static-write]
            v_cache[:, :, position] = v
        else:
            k_cache[:, :, start:end] = k                              # [static-write] [bug-static-write]
            v_cache[:, :, start:end] = v
        keys, values = k_cache[:, :, :end], v_cache[:, :, :end]       # (B, H, T+1, d_k) [static-keys]
        scores = q @ keys.transpose(-2, -1) / math.sqrt(d)            # (B, H, T, T+1) [static-scores]
        causal = torch.ones(T, end, dtype=torch.bool).tril(diagonal=start)
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (weights @ values).transpose(1, 2).reshape(B, T, D)       # (B, T, D) [static-merge]
        return self.o_proj(y), (k_cache, v_cache)


# -- one decode step through SDPA, cache joined with cat ------------------------------------------------

class DynamicCacheSDPA(nn.Module):
    """huggingface/transformers Llama attention with ``DynamicCache``: ``torch.cat([self.keys,
    key_states], dim=-2)`` and SDPA with ``is_causal = q_len > 1`` (sdpa_attention.py): causal at the
    prefill, no mask at a one-token step."""

    def __init__(self, dim: int = 24, heads: int = 3):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def forward(self, x, cache, start):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        q = self.q_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k) [dyn-q]
        k = self.k_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, H, d).transpose(1, 2)           # (B, H, T, d_k)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=-2)                      # (B, H, T+1, d_k) [dyn-cat]
            v = torch.cat([cache[1], v], dim=-2)                      # (B, H, T+1, d_k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)  # (B, H, T, d_k) [dyn-sdpa]
        y = y.transpose(1, 2).reshape(B, T, D)                        # (B, T, D) [dyn-merge]
        return self.o_proj(y), (k, v)


# -- latent attention (DeepSeek-V2 MLA) ----------------------------------------------------------------

class LatentAttention(nn.Module):
    """huggingface/transformers ``DeepseekV2Attention`` (eager): queries per head of width
    nope + rope; keys and values from a low-rank latent (``kv_a_proj_with_mqa`` to rank + rope, an
    RMSNorm, ``kv_b_proj`` up to H * (nope + v)); the rope part of the key is shared by all heads
    (``k_pe.view(B, T, 1, rope).transpose(1, 2)``); query and key states assembled in ``new_empty``
    buffers filled by slices. The cache keeps the latent and ``k_pe`` (the compressed cache of
    huggingface/transformers#47761), joined with ``cat`` along the sequence.

    ``k_pe_view_first=True`` writes ``k_pe.view(B, 1, T, rope)`` directly: the same tensor (a size-1
    axis inserted), the line a review bot called wrong in mindspore-lab/mindone#1477.
    """

    def __init__(self, dim: int = 24, heads: int = 3, rank: int = 6, nope: int = 4, rope: int = 2, v_dim: int = 4,
                 k_pe_view_first: bool = False, q_rank: int | None = None):
        super().__init__()
        self.heads, self.rank, self.nope, self.rope, self.v_dim = heads, rank, nope, rope, v_dim
        self.k_pe_view_first = k_pe_view_first
        if q_rank is None:
            self.q_proj = nn.Linear(dim, heads * (nope + rope), bias=False)
        else:   # DeepseekV2Attention with q_lora_rank: q_a_proj, q_a_layernorm, q_b_proj
            self.q_proj = nn.Sequential(nn.Linear(dim, q_rank, bias=False), nn.RMSNorm(q_rank),
                                        nn.Linear(q_rank, heads * (nope + rope), bias=False))
        self.kv_a_proj_with_mqa = nn.Linear(dim, rank + rope, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(rank)
        self.kv_b_proj = nn.Linear(rank, heads * (nope + v_dim), bias=False)
        self.o_proj = nn.Linear(heads * v_dim, dim, bias=False)

    def forward(self, x, cache, start):
        B, T, _ = x.shape
        H, nope, rope = self.heads, self.nope, self.rope
        q = self.q_proj(x).view(B, T, H, nope + rope).transpose(1, 2)  # (B, H, T, nope+rope) [mla-q]
        q_nope, q_pe = torch.split(q, [nope, rope], dim=-1)
        compressed_kv, k_pe = torch.split(self.kv_a_proj_with_mqa(x), [self.rank, rope], dim=-1)  # (B, T, rank)
        if self.k_pe_view_first:
            k_pe = k_pe.view(B, 1, T, rope)                           # (B, 1, T, rope) [mla-k-pe]
        else:
            k_pe = k_pe.view(B, T, 1, rope).transpose(1, 2)           # (B, 1, T, rope) [mla-k-pe]
        if cache is not None:
            compressed_kv = torch.cat([cache[0], compressed_kv], dim=1)  # (B, T+1, rank) [mla-cat-latent]
            k_pe = torch.cat([cache[1], k_pe], dim=2)                 # (B, 1, T+1, rope) [mla-cat-k-pe]
        S = compressed_kv.shape[1]
        kv = self.kv_b_proj(self.kv_a_layernorm(compressed_kv))       # (B, S, H*(nope+v))
        kv = kv.view(B, S, H, nope + self.v_dim).transpose(1, 2)      # (B, H, S, nope+v) [mla-kv]
        k_nope, value_states = torch.split(kv, [nope, self.v_dim], dim=-1)
        query_states = q_pe.new_empty(B, H, T, nope + rope)
        query_states[:, :, :, :nope] = q_nope
        query_states[:, :, :, nope:] = q_pe
        key_states = k_pe.new_empty(B, H, S, nope + rope)
        key_states[:, :, :, :nope] = k_nope
        key_states[:, :, :, nope:] = k_pe                             # broadcast over heads
        scores = query_states @ key_states.transpose(2, 3) / math.sqrt(nope + rope)  # (B, H, T, S) [mla-scores]
        if T > 1:
            causal = torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)
            scores = scores.masked_fill(~causal, float("-inf"))
        y = scores.softmax(dim=-1) @ value_states                     # (B, H, T, v) [mla-y] [mla-softmax]
        y = y.transpose(1, 2).reshape(B, T, H * self.v_dim)           # (B, T, H*v) [mla-merge]
        return self.o_proj(y), (compressed_kv, k_pe)


def decode(attn_class, T: int = 5, steps: int = 1, **kwargs):
    """A builder: the model around ``attn_class(**kwargs)``, prompt ids (B=2, T), ``steps`` decode steps."""
    def make():
        model = LM(attn_class(**kwargs)).eval()
        ids = torch.randint(0, VOCAB, (2, T))
        return (lambda i: generate(model, i, steps)), (ids,)
    return make


PER_HEAD = ("B", "H", "seq", "d_k")
NO_SLICE_NAMES = ("at a decode step the id picked from logits[:, -1:] enters unnamed, so B and the step's "
                  "sequence axis (T[-1:]) stay unnamed through q, the cache cat and the attention")
NO_BUFFER = "a cache preallocated with new_zeros is never named: {op} into it records no provenance"

CASES = [
    Case("gpt2-legacy-tuple-cache-decode", DIMS, decode(GPT2LegacyAttention),
         heads={"gpt2-q@0": PER_HEAD, "gpt2-k@0": ("B", "H", "d_k", "seq"), "gpt2-q": PER_HEAD,
                "gpt2-cat-k": ("B", "H", "d_k", "seq"), "gpt2-cat-v": PER_HEAD,
                "gpt2-scores": ("B", "H", "seq", "seq"), "gpt2-a": PER_HEAD, "gpt2-merge": ("B", "seq", "D")}),
    Case("gpt2-legacy-cache-key-not-transposed-back", "B=2 T=8 D=24 H=3", decode(GPT2LegacyKeyNotTransposedBack, T=8),
         bug=("bug-gpt2-cat",)),
    Case("gpt2-legacy-cache-transposed-back-T-equals-d_k", "B=2 T=8 D=24 H=3", decode(GPT2LegacyAttention, T=8),
         heads={"gpt2-q": PER_HEAD, "gpt2-cat-k": ("B", "H", "d_k", "seq"), "gpt2-a": PER_HEAD}),
    Case("static-cache-index-copy", DIMS, decode(StaticCacheAttention, write="index_copy"),
         heads={"static-q@0": PER_HEAD, "static-keys@0": PER_HEAD, "static-q": PER_HEAD,
                "static-keys": PER_HEAD, "static-scores": ("B", "H", "seq", "seq"),
                "static-merge": ("B", "seq", "D")}),
    Case("static-cache-indexed-assignment", DIMS, decode(StaticCacheAttention, write="setitem"),
         heads={"static-keys@0": PER_HEAD, "static-keys": PER_HEAD, "static-scores": ("B", "H", "seq", "seq")}),
    Case("static-cache-slice-assignment", DIMS, decode(StaticCacheAttention, write="slice"),
         heads={"static-keys@0": PER_HEAD, "static-keys": PER_HEAD, "static-scores": ("B", "H", "seq", "seq")}),
    Case("static-cache-prefill-written-without-transpose", "B=2 T=3 D=24 H=3",
         decode(StaticCacheAttention, T=3, steps=0, write="slice", transpose=False),
         bug=("bug-static-write",)),
    # transformers StaticCache.update: ``k_out.index_copy_(2, cache_position, key_states)`` with the keys
    # already [B, H, T, d_k], at T == H: the write must stay silent, and the keys read back are per head.
    Case("static-cache-index-copy-transposed-T-equals-H", "B=2 T=3 D=24 H=3",
         decode(StaticCacheAttention, T=3, steps=0, write="index_copy"),
         heads={"static-keys": PER_HEAD, "static-scores": ("B", "H", "seq", "seq")},
         silent=("static-write", "static-keys", "static-scores")),
    Case("static-cache-prefill-transposed-T-equals-H", "B=2 T=3 D=24 H=3",
         decode(StaticCacheAttention, T=3, steps=0, write="slice"),
         heads={"static-q": PER_HEAD, "static-keys": PER_HEAD, "static-scores": ("B", "H", "seq", "seq")}),
    Case("llama-dynamic-cache-one-token-step-sdpa", DIMS, decode(DynamicCacheSDPA, steps=2),
         heads={"dyn-q@0": PER_HEAD, "dyn-sdpa@0": PER_HEAD, "dyn-q": PER_HEAD, "dyn-cat": PER_HEAD,
                "dyn-sdpa": PER_HEAD, "dyn-merge": ("B", "seq", "D")}),
    Case("mla-latent-attention-prefill", DIMS, decode(LatentAttention, steps=0),
         heads={"mla-q": ("B", "H", "seq", "?"), "mla-k-pe": ("B", "!seq", "seq", "?"),
                "mla-kv": ("B", "H", "seq", "?"), "mla-scores": ("B", "H", "seq", "seq"),
                "mla-y": ("B", "H", "seq", "?"), "mla-merge": ("B", "seq", "?")}),
    Case("mla-latent-cache-decode-step", DIMS, decode(LatentAttention),
         heads={"mla-q": ("B", "H", "seq", "?"), "mla-k-pe@0": ("B", "!seq", "seq", "?"),
                "mla-k-pe": ("B", "!seq", "?", "?"), "mla-cat-latent": ("B", "seq", "?"),
                "mla-cat-k-pe": ("B", "!seq", "seq", "?"), "mla-kv": ("B", "H", "seq", "?"),
                "mla-scores": ("B", "H", "seq", "seq")}),
    Case("mla-k-pe-view-with-size-1-head-axis", DIMS, decode(LatentAttention, steps=0, k_pe_view_first=True),
         heads={"mla-k-pe": ("B", "!seq", "seq", "?"), "mla-scores": ("B", "H", "seq", "seq")}),
    # huggingface/transformers DeepseekV2Attention with q_lora_rank set: queries through a low-rank
    # q_a_proj, an RMSNorm and q_b_proj; correct, at T == H: nothing may be reported on the attention
    Case("mla-low-rank-queries-T-equals-H", "B=2 T=3 D=24 H=3", decode(LatentAttention, T=3, steps=1, q_rank=5),
         heads={"mla-q": ("B", "H", "seq", "?"), "mla-kv": ("B", "H", "seq", "?"),
                "mla-scores": ("B", "H", "seq", "seq"), "mla-y": ("B", "H", "seq", "?")},
         silent=("mla-q", "mla-kv", "mla-scores", "mla-softmax", "mla-merge")),
]


test_names, test_verdict = corpus_tests(__name__, CASES)
