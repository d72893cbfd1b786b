"""A Llama-style decode loop with a growing cache: meta-llama/llama, llama/model.py (``Attention.forward``
rotates q and k at ``start_pos``) and huggingface/transformers, src/transformers/cache_utils.py
(``DynamicCache.update``: ``torch.cat([self.key_cache[layer_idx], key_states], dim=-2)``), with
models/llama/modeling_llama.py's ``rotate_half`` and a table ``torch.cat((freqs, freqs), dim=-1)`` of
``torch.outer(positions, inv_freq)``; positions ``torch.arange(past, past + T)`` with ``past`` the cache's
length (transformers' ``cache_position``). A prefill, then one-token steps fed the last output.

Bugs (argument): ``positions-restart``: ``torch.arange(T)`` at every step (the cache offset forgotten);
``positions-one-ahead``: counted from the cache's length after the step's token is appended
(``arange(past + 1, past + 1 + T)``: the new token counted twice); ``merge-no-transpose``: the heads
merged by ``reshape(B, T, -1)`` straight from ``(B, H, T, d)``.

Twin (correct): ``sliding-window``: the cache trimmed to its last ``WINDOW - 1`` entries before the step's key
is appended (Mistral's rolling buffer cache, mistralai/mistral-src ``RotatingBufferCache``; transformers'
``SlidingWindowCache``): positions keep counting past the window, so a position larger than the cache's
length is no finding there; ``grouped-kv``: two key/value heads widened by transformers' ``repeat_kv``
(``hidden_states[:, :, None, :, :].expand(...).reshape(...)``) after the cache, as Llama's grouped-query
attention reads them."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("positions-restart", "positions-one-ahead", "merge-no-transpose")
TWINS = ("sliding-window", "grouped-kv")
WINDOW = 7   # (longer than the prompt: the prefill's causal mask is the window's)
DIMS = ("B=3 T=6 D=64 H=4 H_kv=2",)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)   # (B, H, S, d_k)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class CachedAttention(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.kv = 2 if bug == "grouped-kv" else h
        self.wq, self.wk = nn.Linear(d, d, bias=False), nn.Linear(d, self.kv * self.hd, bias=False)
        self.wv, self.wo = nn.Linear(d, self.kv * self.hd, bias=False), nn.Linear(d, d, bias=False)
        self.inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.k_cache = self.v_cache = None
        self.seen = 0

    def rope(self, x, positions):
        freqs = torch.outer(positions.float(), self.inv_freq)           # (T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                         # (T, d_k)
        return x * emb.cos() + rotate_half(x) * emb.sin()

    def forward(self, x):
        B, T, _ = x.shape
        past = 0 if self.k_cache is None else self.k_cache.shape[2]
        if self.bug == "sliding-window":
            past = self.seen                                             # tokens seen, past the window
        if self.bug == "positions-restart":
            positions = torch.arange(T)                                  # bug: the cache offset forgotten
        elif self.bug == "positions-one-ahead":
            positions = torch.arange(past + 1, past + 1 + T)             # bug: the new token counted twice
        else:
            positions = torch.arange(past, past + T)                     # (T,)
        q = self.wq(x).view(B, T, self.h, self.hd).transpose(1, 2)      # (B, H, T, d_k)
        k = self.wk(x).view(B, T, self.kv, self.hd).transpose(1, 2)     # (B, H_kv, T, d_k)
        v = self.wv(x).view(B, T, self.kv, self.hd).transpose(1, 2)     # (B, H_kv, T, d_k)
        q, k = self.rope(q, positions), self.rope(k, positions)
        if self.k_cache is not None and self.bug == "sliding-window":
            k = torch.cat([self.k_cache[:, :, 1 - WINDOW:], k], dim=-2)  # (B, H, ≤WINDOW, d_k)
            v = torch.cat([self.v_cache[:, :, 1 - WINDOW:], v], dim=-2)  # (B, H, ≤WINDOW, d_k)
        elif self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim=-2)                    # (B, H, past+T, d_k)
            v = torch.cat([self.v_cache, v], dim=-2)                    # (B, H, past+T, d_k)
        self.k_cache, self.v_cache, self.seen = k, v, self.seen + T
        k, v = repeat_kv(k, self.h // self.kv), repeat_kv(v, self.h // self.kv)   # (B, H, past+T, d_k)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)  # (B, H, T, d_k)
        if self.bug == "merge-no-transpose":
            return self.wo(out.reshape(B, T, -1))                       # bug: (B, H·T·d) regrouped
        return self.wo(out.transpose(1, 2).reshape(B, T, -1))          # (B, T, D)


class Decode(nn.Module):
    def __init__(self, attn, steps=3):
        super().__init__()
        self.attn, self.steps = attn, steps

    def forward(self, x):
        self.attn.k_cache = self.attn.v_cache = None
        self.attn.seen = 0
        y = self.attn(x)
        for _ in range(self.steps):
            y = self.attn(y[:, -1:, :])                                  # (B, 1, D)
        return y


def build(bug="", B=3, T=6, D=64, H=4):
    """--dims 'B=3 T=6 D=64 H=4 H_kv=2': hidden states (B, T, D)."""
    torch.manual_seed(0)
    return Decode(CachedAttention(D, H, bug)).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
