"""trymirai/lalamo PR #200 ("Fix dynamic sliding-window KV cache mask for multi-token causal decode", merged):
``DynamicKVCacheLayer.attention_mask`` built the mask of a chunk of ``suffix`` new queries against ``total``
cached and new keys with ``tril``/``triu`` on suffix-local row indices. The causal edge was offset by the
prefix (``tril(k=total - suffix)``) but the window's lower edge was not (``triu(k=-(window - 1))``), so with
a prefix already cached query i of the chunk (absolute position ``P + i``) saw every key from ``i - window +
1`` on: the whole prefix, not the ``window`` keys before it; single-token and multi-token decoding attended
to different key sets. The fix measures both edges in absolute positions (query positions ``P + i``).

lalamo is JAX; here its cache and mask in torch, in its terms: a layer with ``q_proj``/``k_proj``/
``v_proj``/``o_proj``, keys and values cached ``(B, total, H, d)``, the mask ``(suffix, total)`` of booleans
broadcast over batch and heads, ``where(mask, scores, -inf)``, ``softmax(-1)``. A window of 3; a prefill of
T tokens (its mask: causal and banded), then a chunk of 3 tokens against the cache.

Bug (argument): ``window-local-rows``: the window's edge at the suffix-local row."""

import math
import sys

import torch
from torch import nn

BUGS = ("window-local-rows",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
WINDOW = 3


def attention_mask(suffix_length, total_length, window, bug=""):
    result = torch.ones(suffix_length, total_length, dtype=torch.bool)
    result = torch.tril(result, diagonal=total_length - suffix_length)          # causal: offset by the prefix
    lower = -(window - 1) if bug == "window-local-rows" else total_length - suffix_length - (window - 1)
    return torch.triu(result, diagonal=lower)                                    # (suffix, total) [window]


class SlidingAttention(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.head_dim, self.bug = n_heads, dim // n_heads, bug
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x, cache=None):
        bsz, suffix, dim = x.shape
        q = self.q_proj(x).view(bsz, suffix, self.n_heads, self.head_dim)      # (B, T, H, d)
        k = self.k_proj(x).view(bsz, suffix, self.n_heads, self.head_dim)
        v = self.v_proj(x).view(bsz, suffix, self.n_heads, self.head_dim)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=1), torch.cat([cache[1], v], dim=1)   # (B, P+T, H, d)
        total = k.shape[1]
        mask = attention_mask(suffix, total, WINDOW, self.bug)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.head_dim)   # (B, H, T, P+T)
        scores = torch.where(mask, scores, float("-inf"))
        out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)            # (B, T, H, d)
        return self.o_proj(out.reshape(bsz, suffix, dim)), (k, v)


class Model(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.attn = SlidingAttention(dim, n_heads, bug)

    def forward(self, prompt, chunk):
        _, cache = self.attn(prompt)                # prefill
        out, _ = self.attn(chunk, cache)            # a chunk of new tokens against the cache
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Model(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 3, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
