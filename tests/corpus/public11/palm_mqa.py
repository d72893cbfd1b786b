"""lucidrains/PaLM-pytorch, palm_pytorch/palm_pytorch.py (v0.2, ``ParallelTransformerBlock``, attention branch):
multi-query attention: queries of H heads, one shared key/value head (``to_kv`` of width 2·d split with
``chunk(2, dim=-1)``), rotary on q and k (``RotaryEmbedding``, ``rotate_half`` by ``rearrange``), queries
``rearrange(q, 'b n (h d) -> b h n d')`` and scaled, ``einsum('b h i d, b j d -> b h i j')``, a causal mask
``ones(n, n).triu(1)`` by ``masked_fill(-finfo.max)``, ``einsum('b h i j, b j d -> b h i d')``,
``rearrange(out, 'b h n d -> b n (h d)')``, ``attn_out``.

Bugs (argument): ``sim-transposed``: the similarities written ``einsum('b h i d, b j d -> b h j i')`` (the
output's two token letters swapped, an easy slip of the notation): the causal mask then hides, for each key,
the queries before it, and each query reads the keys after it."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


def rotate_half(x):
    x = rearrange(x, "... (j d) -> ... j d", j=2)
    x1, x2 = x.unbind(dim=-2)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(pos, t):
    return (t * pos.cos()) + (rotate_half(t) * pos.sin())


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, max_seq_len):
        seq = torch.arange(max_seq_len, dtype=self.inv_freq.dtype)
        freqs = einsum("i , j -> i j", seq, self.inv_freq)
        return torch.cat((freqs, freqs), dim=-1)                          # (T, d)


class MultiQueryAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.dim_head, self.bug = heads, dim // heads, bug
        self.scale = self.dim_head**-0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, 2 * self.dim_head, bias=False)
        self.rotary_emb = RotaryEmbedding(self.dim_head)
        self.attn_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        n = x.shape[1]
        q = rearrange(self.to_q(x), "b n (h d) -> b h n d", h=self.heads)   # (B, H, T, d)
        k, v = self.to_kv(x).chunk(2, dim=-1)                              # (B, T, d) each
        positions = self.rotary_emb(n)
        q, k = apply_rotary_pos_emb(positions, q), apply_rotary_pos_emb(positions, k)
        q = q * self.scale
        if self.bug == "sim-transposed":
            sim = einsum("b h i d, b j d -> b h j i", q, k)                # bug: (B, H, keys, queries)
        else:
            sim = einsum("b h i d, b j d -> b h i j", q, k)                # (B, H, T, T)
        causal_mask = torch.ones((n, n), dtype=torch.bool).triu(1)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b j d -> b h i d", attn, v)                 # (B, H, T, d)
        return self.attn_out(rearrange(out, "b h n d -> b n (h d)"))


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return MultiQueryAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("sim-transposed",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
