"""lucidrains/rotary-embedding-torch issue #11 ("Bug in cache", fixed by the author: "oh yes, good catch"):
``rotate_queries_or_keys(t, offset=...)`` memoised its frequencies under ``cache_key=f'freqs:{seq_len}'``, so a
second call with the same length and another offset got the first call's frequencies: at every decoding step
after the first, the new token's query and key were rotated to the first step's position. The fix puts the
offset in the key (``f'freqs:{seq_len}:{offset}'``).

The idiom: a ``RotaryEmbedding`` module (``inv_freq`` buffer, ``freqs = einsum('i,j->ij', t, inv_freq)``
repeated pairwise ``(n r) -> n (r 2)`` style with ``repeat_interleave(2)``, ``rotate_half`` on interleaved pairs),
a dict cache of frequencies, attention ``[B, H, T, d]`` with a key cache. The model runs a prefill of T tokens
then two decoding steps.

Bug (argument): ``offset-not-in-cache-key``: the frequencies are cached by length only."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("offset-not-in-cache-key",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x = x.unflatten(-1, (-1, 2))                                 # (..., d/2, 2): interleaved pairs
    x1, x2 = x.unbind(dim=-1)
    return torch.stack((-x2, x1), dim=-1).flatten(-2)            # (..., d)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, bug=""):
        super().__init__()
        self.bug = bug
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))
        self.cache = {}

    def forward(self, seq_len, offset):
        key = f"freqs:{seq_len}" if self.bug == "offset-not-in-cache-key" else f"freqs:{seq_len}:{offset}"
        if key not in self.cache:
            t = torch.arange(seq_len, dtype=torch.float) + offset                      # (T,)   [positions]
            freqs = torch.einsum("i,j->ij", t, self.inv_freq)                         # (T, d/2)
            self.cache[key] = freqs.repeat_interleave(2, dim=-1)                      # (T, d)
        return self.cache[key]

    def rotate_queries_or_keys(self, t, offset=0):
        freqs = self(t.shape[-2], offset)
        return t * freqs.cos() + rotate_half(t) * freqs.sin()                         # [rotary]


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.rotary = RotaryEmbedding(self.dim_head, bug)

    def forward(self, x, cache=None):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.to_qkv(x).chunk(3, dim=-1))                           # each (B, H, n, d)
        offset = 0 if cache is None else cache[0].shape[-2]
        q = self.rotary.rotate_queries_or_keys(q, offset)
        k = self.rotary.rotate_queries_or_keys(k, offset)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], v], dim=-2)  # (B, H, P+n, d)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        return self.to_out(out.transpose(1, 2).reshape(b, n, -1)), (k, v)


class Model(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.attn = Attention(dim, heads, bug)

    def forward(self, prompt, step1, step2):
        _, cache = self.attn(prompt)
        _, cache = self.attn(step1, cache)
        out, _ = self.attn(step2, cache)
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Model(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
