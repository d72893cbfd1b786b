"""Lightning-AI/litgpt, litgpt/model.py (``CausalSelfAttention.forward`` and ``.scaled_dot_product_attention``,
``build_rope_cache``, ``apply_rope``, ``do_softcapping``; 2025, the Gemma-2 path of the config): one ``qkv`` linear of
width ``(n_head + 2 * n_query_groups) * head_size`` cut by ``qkv.split((query_size, key_size, value_size), dim=-1)``,
each ``view(B, T, heads, head_size).transpose(1, 2)``; rotary on the first ``rope_n_elem`` features
(``apply_rope(q[..., :rope_n_elem], cos, sin)`` then ``torch.cat((q_roped, q[..., rope_n_elem:]), dim=-1)``); the
query groups balanced by ``k.repeat_interleave(q_per_kv, dim=1)``; on the layers where
``config.sliding_window_indices[block_idx]`` is set (Gemma-2: every other layer) and ``T > sliding_window_size``, the
additive mask ``full((T, T), -inf)`` made ``mask.triu(diagonal=1) + mask.tril(diagonal=-sliding_window_size)``; with
``attention_logit_softcapping`` the eager path ``scores = q @ k.mT * scale``, ``do_softcapping`` (``tanh(x / thresh) *
thresh``), then ``scores + mask`` (the causal ``ones(T, T).triu(1)`` filled with ``finfo.min`` where no mask was
made), softmax in float32, ``(scores @ v).transpose(1, 2)``, ``reshape(B, T, head_size * n_head)``, ``proj``. Two
blocks here: block 0 slides (window 3), block 1 is global, as Gemma-2 alternates them.

Bugs: ``window-without-causal``: the sliding layer's mask made of the sliding bias alone, ``mask =
mask.tril(diagonal=-sliding_window_size)`` (the ``triu(diagonal=1)`` half dropped, as if the causal part came from
elsewhere: once a mask is given, neither the eager path nor SDPA's ``is_causal=mask is None`` adds the triangle, so
every query of the sliding layer sees all later tokens); ``window-one-wider``: the sliding bias
``mask.tril(diagonal=-sliding_window_size - 1)`` (the window of flash-attn's ``(w, 0)`` convention: ``w + 1`` keys
per query where the config says ``w``, the off-by-one between the eager and the kernel windows)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class Config:
    def __init__(self, n_embd, n_head, n_query_groups, sliding_window_size=3, softcap=50.0):
        self.n_embd, self.n_head, self.n_query_groups = n_embd, n_head, n_query_groups
        self.head_size = n_embd // n_head
        self.rope_n_elem = self.head_size                                            # Gemma-2: rotary_percentage 1.0
        self.sliding_window_size = sliding_window_size
        self.sliding_window_indices = [1, 0]
        self.attention_logit_softcapping = softcap


def build_rope_cache(seq_len, n_elem, base=10000):
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2).float() / n_elem))          # (n_elem / 2,)
    seq_idx = torch.arange(seq_len).float()                                          # (T,)
    idx_theta = torch.outer(seq_idx, theta).repeat(1, 2)                             # (T, n_elem)
    return torch.cos(idx_theta), torch.sin(idx_theta)


def apply_rope(x, cos, sin):
    head_size = x.size(-1)
    x1 = x[..., : head_size // 2]                                                    # (B, nh, T, hs/2)
    x2 = x[..., head_size // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)                                           # (B, nh, T, hs)
    return (x * cos) + (rotated * sin)


def do_softcapping(x, thresh):
    return torch.tanh(x / thresh) * thresh


class CausalSelfAttention(nn.Module):
    def __init__(self, config, block_idx, bug=""):
        super().__init__()
        self.qkv = nn.Linear(config.n_embd, (config.n_head + 2 * config.n_query_groups) * config.head_size)
        self.proj = nn.Linear(config.head_size * config.n_head, config.n_embd)
        self.apply_sliding_window_attention = bool(config.sliding_window_indices[block_idx])
        self.config, self.bug = config, bug

    def forward(self, x, cos, sin):
        head_size, n_head, n_query_groups = self.config.head_size, self.config.n_head, self.config.n_query_groups
        rope_n_elem = self.config.rope_n_elem
        B, T, C = x.size()                                                           # (B, T, C)
        qkv = self.qkv(x)                                                            # (B, T, 3xC*)
        query_size = n_head * head_size
        key_size = value_size = n_query_groups * head_size
        q, k, v = qkv.split((query_size, key_size, value_size), dim=-1)              # 3x(B, T, C*)
        q = q.view(B, T, n_head, head_size).transpose(1, 2)                          # (B, nh_q, T, hs)
        k = k.view(B, T, n_query_groups, head_size).transpose(1, 2)                  # (B, nh_k, T, hs)
        v = v.view(B, T, n_query_groups, head_size).transpose(1, 2)                  # (B, nh_v, T, hs)

        q_roped = apply_rope(q[..., :rope_n_elem], cos, sin)
        k_roped = apply_rope(k[..., :rope_n_elem], cos, sin)
        q = torch.cat((q_roped, q[..., rope_n_elem:]), dim=-1)                       # (B, nh_q, T, hs)
        k = torch.cat((k_roped, k[..., rope_n_elem:]), dim=-1)                       # (B, nh_k, T, hs)

        if n_query_groups != n_head:
            q_per_kv = n_head // n_query_groups
            k = k.repeat_interleave(q_per_kv, dim=1)                                 # (B, nh_q, T, hs)
            v = v.repeat_interleave(q_per_kv, dim=1)                                 # (B, nh_q, T, hs)

        mask = None
        if self.apply_sliding_window_attention and T > self.config.sliding_window_size:
            mask = torch.full((T, T), float("-inf"), dtype=q.dtype)                  # (T, T)
            below = -self.config.sliding_window_size - (self.bug == "window-one-wider")
            if self.bug == "window-without-causal":
                mask = mask.tril(diagonal=below)
            else:
                mask = mask.triu(diagonal=1) + mask.tril(diagonal=below)
            mask = mask.view(1, 1, T, T)                                             # (1, 1, T, T)

        y = self.scaled_dot_product_attention(q, k, v, mask)                         # (B, T, nh_q, hs)
        y = y.reshape(B, T, head_size * n_head)                                      # (B, T, C*)
        return self.proj(y)                                                          # (B, T, C)

    def scaled_dot_product_attention(self, q, k, v, mask=None):
        scale = 1.0 / math.sqrt(self.config.head_size)
        scores = q @ k.mT * scale                                                    # (B, nh, T, T)
        scores = do_softcapping(scores, self.config.attention_logit_softcapping)
        if mask is None:
            mask = torch.ones(q.size(2), q.size(2), dtype=q.dtype).triu(diagonal=1)  # (T, T)
            mask.masked_fill_(mask.bool(), torch.finfo(q.dtype).min)
        scores = scores + mask
        scores = F.softmax(scores, dim=-1, dtype=torch.float).to(dtype=q.dtype)
        y = scores @ v                                                               # (B, nh, T, hs)
        return y.transpose(1, 2)                                                     # (B, T, nh, hs)


class GemmaTwoBlocks(nn.Module):
    """Two of litgpt's ``Block``s reduced to their attention: block 0 slides, block 1 is global."""

    def __init__(self, config, bug=""):
        super().__init__()
        self.h = nn.ModuleList(CausalSelfAttention(config, i, bug) for i in range(2))
        self.config = config

    def forward(self, x):
        T = x.size(1)
        cos, sin = build_rope_cache(T, self.config.rope_n_elem)                      # (T, hs)
        for block in self.h:
            x = x + block(x, cos, sin)
        return x


BUGS = ("window-without-causal", "window-one-wider")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 H_kv=2"}


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return GemmaTwoBlocks(Config(D, H, H_kv), bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
