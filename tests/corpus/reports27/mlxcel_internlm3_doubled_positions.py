"""lablup/mlxcel issue #1324 ("fix(internlm3): stop doubling RoPE positions under dynamic NTK scaling", fixed by
pull request #1389): ``ModelArgs::rope_scale`` returned ``1 / factor`` for ``rope_type == "linear"`` and fell
through to ``unwrap_or(2.0)`` for ``"dynamic"`` (and for no ``rope_scaling``), and that value was handed to the
rope as its position scale, so every query and key was rotated at twice its true position (``2 * (offset + i)``)
on every request; the correct dynamic-NTK schedule keeps the positions unscaled and only grows the base past
``max_position_embeddings``. The same slip is in stock mlx-lm's ``internlm3.py`` the port followed.

The idiom: mlx-lm's ``internlm3`` ``Attention`` written in torch (``q_proj``/``k_proj``/``v_proj``/``o_proj``
without bias, grouped KV heads, ``reshape(B, L, n_heads, -1).transpose(1, 2)``, ``self.rope(x, offset=
cache.offset)`` with mlx's ``nn.RoPE`` convention: non-traditional halves, ``positions = (offset + arange(L)) *
scale``), a ``KVCache`` whose ``update_and_fetch`` concatenates along the tokens and advances ``offset``,
``scaled_dot_product_attention`` with a causal mask at prefill; a prompt prefilled, then one decode step.

Bug (positions): ``doubled-positions``: the rope's ``scale`` is ``2.0`` (the ``unwrap_or(2.0)`` fall-through)
instead of ``1.0``: the prompt at positions 0, 2, 4, ... and the decoded token at ``2 * offset``."""

import sys

import torch
from torch import nn

BUGS = ("doubled-positions",)
TWINS = ()
DIMS = ("B=2 T=6 D=48 H=6 H_kv=3",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 H_kv=2"}


class RoPE(nn.Module):
    """mlx ``nn.RoPE(dims, traditional=False, base, scale)``: positions ``(offset + i) * scale``."""

    def __init__(self, dims, base=10000.0, scale=1.0):
        super().__init__()
        self.dims, self.base, self.scale = dims, base, scale

    def forward(self, x, offset=0):
        L = x.shape[-2]
        positions = (offset + torch.arange(L, dtype=torch.float32)) * self.scale
        inv_freq = self.base ** (-torch.arange(0, self.dims, 2, dtype=torch.float32) / self.dims)
        theta = positions[:, None] * inv_freq[None, :]
        cos, sin = theta.cos(), theta.sin()
        x1, x2 = x[..., :self.dims // 2], x[..., self.dims // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class KVCache:
    def __init__(self):
        self.keys = self.values = None
        self.offset = 0

    def update_and_fetch(self, keys, values):
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)
            self.values = torch.cat([self.values, values], dim=2)
        self.offset += keys.shape[2]
        return self.keys, self.values


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, bug=""):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = dim // n_heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        rope_scale = 2.0 if bug == "doubled-positions" else 1.0                 # rope_type == "dynamic"
        self.rope = RoPE(self.head_dim, base=10000.0, scale=rope_scale)

    def forward(self, x, mask=None, cache=None):
        B, L, _ = x.shape
        queries = self.q_proj(x).reshape(B, L, self.n_heads, -1).transpose(1, 2)
        keys = self.k_proj(x).reshape(B, L, self.n_kv_heads, -1).transpose(1, 2)
        values = self.v_proj(x).reshape(B, L, self.n_kv_heads, -1).transpose(1, 2)
        queries = self.rope(queries, offset=cache.offset)
        keys = self.rope(keys, offset=cache.offset)
        keys, values = cache.update_and_fetch(keys, values)
        output = torch.nn.functional.scaled_dot_product_attention(
            queries, keys, values, attn_mask=mask, scale=self.scale, enable_gqa=True)
        return self.o_proj(output.transpose(1, 2).reshape(B, L, -1))


class Generate(nn.Module):
    """A prompt prefilled under a causal mask, then one token decoded against the cache."""

    def __init__(self, attn):
        super().__init__()
        self.attn = attn

    def forward(self, prompt, step):
        cache = KVCache()
        L = prompt.shape[1]
        causal = torch.ones(L, L, dtype=torch.bool).tril()
        self.attn(prompt, mask=causal, cache=cache)
        return self.attn(step, cache=cache)


def build(bug="", B=2, T=6, D=48, H=6, H_kv=3):
    torch.manual_seed(0)
    model = Generate(Attention(D, H, H_kv, bug=bug)).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
