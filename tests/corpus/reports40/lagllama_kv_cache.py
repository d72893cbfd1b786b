"""time-series-foundation-models/lag-llama issue #81 ("Broken kv_cache and fixes.", fixed by pull request #84):
with ``use_kv_cache`` the forecasts were far worse than without, although "theoretically it should get the same
results". Two of the three causes the reporter found are in ``CausalSelfAttention.forward`` (lag_llama/model/
module.py): the attention ran with ``is_causal=False`` whenever the cache was in use, so the first call, which
fills the cache from the whole context, attended to the future too ("Causal Attention Error"; the fix keeps
``is_causal=True`` until the cache is built); and the rotary tables were built for ``seq_len=T``, the length of
the new input (1 at a decoding step), so the step's query and every key of the cache were rotated for position
0 ("Broken Rotary Embeddings"; the fix builds them for the length after the concatenation, the query at the last
position, ``position_ids=[-1]``).

The idiom (module.py after the fix): ``q_proj`` and ``kv_proj(x).split(n_embd, dim=2)``, the rolling cache
``torch.cat([self.kv_cache[0], k], dim=1)[:, 1:]`` (the window keeps the context's length), ``view(B, -1, H,
d).transpose(1, 2)``, ``LlamaRotaryEmbedding`` (``cos_cached[:, :, :seq_len]``) and ``apply_rotary_pos_emb``
(``cos[position_ids].unsqueeze(1)``), ``scaled_dot_product_attention``, ``c_proj``; two RMSNorm pre-norm blocks with
the SwiGLU MLP. The model fills the cache from a context of T steps and decodes one step; it returns the hidden
states of the two forecasts (the context's last position and the step).

Bugs (argument): ``prefill-not-causal``: ``is_causal=False`` whenever the cache is in use (the report's first
attention error); ``rope-step-length``: the rotary tables built for the new input's length, with no positions."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("prefill-not-causal", "rope-step-length")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=64, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_position_embeddings, dtype=inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, inv_freq)                                 # (max_T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                      # (max_T, d)
        self.register_buffer("cos_cached", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cached", emb.sin()[None, None, :, :], persistent=False)

    def forward(self, seq_len):
        return self.cos_cached[:, :, :seq_len, ...], self.sin_cached[:, :, :seq_len, ...]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids):
    cos = cos.squeeze(1).squeeze(0)                                                  # (T, d)
    sin = sin.squeeze(1).squeeze(0)                                                  # (T, d)
    cos = cos[position_ids].unsqueeze(1)                                             # (1, 1, T, d)
    sin = sin[position_ids].unsqueeze(1)                                             # (1, 1, T, d)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd_per_head, n_head, bug=""):
        super().__init__()
        n_embd = n_embd_per_head * n_head
        self.q_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.kv_proj = nn.Linear(n_embd, 2 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.n_head, self.n_embd_per_head, self.bug = n_head, n_embd_per_head, bug
        self.rotary_emb = LlamaRotaryEmbedding(n_embd_per_head)
        self.kv_cache = None

    def forward(self, x, use_kv_cache):
        (B, T, C) = x.size()
        q = self.q_proj(x)
        k, v = self.kv_proj(x).split(self.n_embd_per_head * self.n_head, dim=2)

        cache_initialized = self.kv_cache is not None
        if use_kv_cache:
            if cache_initialized:
                k = torch.cat([self.kv_cache[0], k], dim=1)[:, 1:]                   # (B, T, D)
                v = torch.cat([self.kv_cache[1], v], dim=1)[:, 1:]                   # (B, T, D)
            self.kv_cache = k, v

        k = k.view(B, -1, self.n_head, self.n_embd_per_head).transpose(1, 2)         # (B, H, T, d)
        q = q.view(B, -1, self.n_head, self.n_embd_per_head).transpose(1, 2)         # (B, H, T, d)
        v = v.view(B, -1, self.n_head, self.n_embd_per_head).transpose(1, 2)         # (B, H, T, d)

        true_seq_len = k.size(2)
        if use_kv_cache and cache_initialized and self.bug != "rope-step-length":
            cos, sin = self.rotary_emb(seq_len=true_seq_len)
            q, _ = apply_rotary_pos_emb(q, k, cos, sin, position_ids=[-1])
            _, k = apply_rotary_pos_emb(q, k, cos, sin, position_ids=None)
        else:
            cos, sin = self.rotary_emb(seq_len=T)
            q, k = apply_rotary_pos_emb(q, k, cos, sin, position_ids=None)

        if self.bug == "prefill-not-causal":
            is_causal = not use_kv_cache
        else:
            is_causal = not (use_kv_cache and cache_initialized)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=is_causal)   # (B, H, T, d)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                             # (B, T, D)
        return self.c_proj(y)


class RMSNorm(nn.Module):
    def __init__(self, size, dim=-1, eps=1e-5):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(size))
        self.eps, self.dim = eps, dim

    def forward(self, x):
        norm_x = x.pow(2).mean(dim=self.dim, keepdim=True)
        return self.scale * (x * torch.rsqrt(norm_x + self.eps))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bug=""):
        super().__init__()
        self.rms_1, self.rms_2 = RMSNorm(n_embd), RMSNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd // n_head, n_head, bug)
        self.c_fc1 = nn.Linear(n_embd, 2 * n_embd, bias=False)
        self.c_fc2 = nn.Linear(n_embd, 2 * n_embd, bias=False)
        self.c_proj = nn.Linear(2 * n_embd, n_embd, bias=False)

    def forward(self, x, use_kv_cache):
        x = x + self.attn(self.rms_1(x), use_kv_cache)
        h = self.rms_2(x)
        return x + self.c_proj(F.silu(self.c_fc1(h)) * self.c_fc2(h))


class LagLlamaDecoder(nn.Module):
    def __init__(self, n_embd, n_head, n_layer=2, bug=""):
        super().__init__()
        self.h = nn.ModuleList([Block(n_embd, n_head, bug) for _ in range(n_layer)])

    def step(self, x, use_kv_cache):
        for block in self.h:
            x = block(x, use_kv_cache)
        return x

    def forward(self, context, next_input):                                          # (B, T, D), (B, 1, D)
        for block in self.h:
            block.attn.kv_cache = None
        first = self.step(context, use_kv_cache=True)[:, -1:]                        # (B, 1, D)
        second = self.step(next_input, use_kv_cache=True)                            # (B, 1, D)
        return torch.cat((first, second), dim=1)                                     # (B, 2, D)


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    return LagLlamaDecoder(D, H, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
