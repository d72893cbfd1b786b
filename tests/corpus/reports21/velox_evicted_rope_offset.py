"""rajveer43/VeloxQuant-MLX issue #389 ("squeeze/pyramidkv/chunkkv/cam: self.offset reset to retained-row-count
every step corrupts RoPE position", the same defect fixed for Q-Filters in #171 and for TOVA / L2Norm in PRs
#196 / #195 with a true-position counter): the eviction caches ended ``update_and_fetch`` by resetting
``self.offset = 0`` and re-appending the kept rows, so ``offset`` became the number of RETAINED rows; the
attention rotates each new query and key at ``offset=cache.offset`` before updating the cache, so once a row
was evicted every later token was rotated at a position behind its true one (by the number of rows evicted).

The idiom (mlx_lm's Llama attention over a VeloxQuant cache, written here in torch): ``q_proj``/``k_proj``/
``v_proj`` without bias, ``reshape(B, L, H, -1).transpose(1, 2)``, ``self.rope(x, offset=cache.offset)`` (the
non-traditional RoPE: halves rotated, ``arange(offset, offset + L)`` positions), ``cache.update_and_fetch``,
``scaled_dot_product_attention`` with a causal mask at prefill, ``o_proj``. The cache keeps a budget of rows:
the first ``n_sink`` and the most recent ones (a ChunkKV-like eviction). The model prefills T tokens with a
budget of T rows, then decodes three tokens one at a time, so the second and third are rotated after an
eviction.

Bug (argument): ``offset-retained-rows``: the cache's ``offset`` is its retained row count after the update."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("offset-retained-rows",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RoPE(nn.Module):
    def __init__(self, dims, base=10000.0):
        super().__init__()
        self.dims, self.base = dims, base

    def forward(self, x, offset=0):
        L = x.shape[-2]
        positions = torch.arange(offset, offset + L, dtype=torch.float32)
        freqs = self.base ** (-torch.arange(0, self.dims, 2, dtype=torch.float32) / self.dims)
        theta = positions[:, None] * freqs[None, :]                              # (L, d/2)
        cos, sin = theta.cos(), theta.sin()
        x1, x2 = x[..., : self.dims // 2], x[..., self.dims // 2 :]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class ChunkKVCache:
    def __init__(self, budget, n_sink=1, bug=""):
        self.budget, self.n_sink, self.bug = budget, n_sink, bug
        self.keys = self.values = None
        self.offset = 0

    def _base_update(self, keys, values):
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)
            self.values = torch.cat([self.values, values], dim=2)
        self.offset += keys.shape[2]
        return self.keys, self.values

    def update_and_fetch(self, keys, values):
        true_offset = self.offset + keys.shape[2]
        k, v = self._base_update(keys, values)
        if k.shape[2] > self.budget:
            recent = self.budget - self.n_sink
            k = torch.cat([k[:, :, : self.n_sink], k[:, :, -recent:]], dim=2)
            v = torch.cat([v[:, :, : self.n_sink], v[:, :, -recent:]], dim=2)
            self.offset, self.keys, self.values = 0, None, None
            k, v = self._base_update(k, v)                                         # offset = kept rows
            if self.bug != "offset-retained-rows":
                self.offset = true_offset
        return k, v


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.rope = RoPE(self.head_dim)

    def forward(self, x, cache):
        B, L, _ = x.shape
        queries = self.q_proj(x).reshape(B, L, self.n_heads, -1).transpose(1, 2)
        keys = self.k_proj(x).reshape(B, L, self.n_heads, -1).transpose(1, 2)
        values = self.v_proj(x).reshape(B, L, self.n_heads, -1).transpose(1, 2)
        queries = self.rope(queries, offset=cache.offset)
        keys = self.rope(keys, offset=cache.offset)
        keys, values = cache.update_and_fetch(keys, values)
        out = F.scaled_dot_product_attention(queries, keys, values, is_causal=L > 1, scale=self.scale)
        return self.o_proj(out.transpose(1, 2).reshape(B, L, -1))


class Generator(nn.Module):
    def __init__(self, dim, n_heads, budget, bug=""):
        super().__init__()
        self.budget, self.bug = budget, bug
        self.attn = Attention(dim, n_heads)

    def forward(self, prompt, steps):
        cache = ChunkKVCache(self.budget, bug=self.bug)
        outs = [self.attn(prompt, cache)]
        for i in range(steps.shape[1]):
            outs.append(self.attn(steps[:, i : i + 1], cache))
        return torch.cat(outs, dim=1)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = Generator(D, H, budget=T, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, 3, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
