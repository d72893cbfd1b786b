"""lucidrains/RETRO-pytorch, retro_pytorch/retro_pytorch.py (``Attention``, ``ChunkedCrossAttention``), 0a43e49:
RETRO's chunked cross-attention. The decoder's tokens ``(b, n, d)`` are shifted by ``causal_padding = chunk_size
- 1`` with ``F.pad(x, (0, 0, -causal_padding, causal_padding))`` (a negative pad drops the first tokens), cut
into chunks by ``rearrange(x, 'b (k n) d -> (b k) n d', n=chunk_size)``; each chunk's retrieved neighbours
``(b, k, r, n, d)`` become its keys by ``rearrange(context, 'b k r n d -> (b k) (r n) d')``; the ``Attention``
(``RMSNorm`` on the queries' input, ``to_q``, ``to_kv(...).chunk(2, dim=-1)``, ``'b n (h d) -> b h n d'``,
``q * scale``, ``einsum('b h i d, b h j d -> b h i j')``, ``softmax(dim=-1)``, ``einsum('b h i j, b h j d -> b h
i d')``, ``'b h n d -> b n (h d)'``, ``to_out``); the chunks put back by ``'(b k) n d -> b (k n) d'`` and
un-shifted by ``F.pad(out, (0, 0, causal_padding, -causal_padding))``. The rotary embeddings the decoder passes
(``pos_emb``) are left out here (``pos_emb=None``, a path the class has).

Bug: ``chunks-interleaved``: the tokens cut ``'b (n k) d -> (b k) n d'`` (and put back the same way): each
"chunk" is every k-th token, so a query attends to the neighbours retrieved for another chunk. Twin:
``neighbours-merged-n-r``: the keys merged ``'b k r n d -> (b k) (n r) d'``: without positions the keys' order
is irrelevant to attention (a permutation of the keys and values together)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import einsum, nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-8):
        super().__init__()
        self.eps = eps
        self.scale = dim ** -0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = x.norm(keepdim=True, dim=-1) * self.scale
        return (x / norm.clamp(min=self.eps)) * self.gamma


class Attention(nn.Module):
    def __init__(self, dim, dim_head=8, heads=4):
        super().__init__()
        self.heads = heads
        self.scale = dim_head ** -0.5
        inner_dim = dim_head * heads
        self.norm = RMSNorm(dim)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x, context):
        h = self.heads
        x = self.norm(x)
        q = self.to_q(x)
        k, v = self.to_kv(context).chunk(2, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))  # (B*K, H, n, d_k)
        q = q * self.scale
        sim = einsum("b h i d, b h j d -> b h i j", q, k)  # (B*K, H, n, R*n)
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)  # (B*K, H, n, d_k)
        out = rearrange(out, "b h n d -> b n (h d)")  # (B*K, n, D)
        return self.to_out(out)


class ChunkedCrossAttention(nn.Module):
    def __init__(self, dim, heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.cross_attn = Attention(dim, dim_head=dim // heads, heads=heads)

    def forward(self, x, context):
        n, chunk_size = x.shape[-2], context.shape[-2]
        causal_padding = chunk_size - 1
        x = F.pad(x, (0, 0, -causal_padding, causal_padding), value=0.)  # (B, T, D)
        cut = "b (n k) d -> (b k) n d" if self.bug == "chunks-interleaved" else "b (k n) d -> (b k) n d"
        x = rearrange(x, cut, n=chunk_size)  # (B*K, n, D)
        merge = "b k r n d -> (b k) (n r) d" if self.bug == "neighbours-merged-n-r" else \
            "b k r n d -> (b k) (r n) d"
        context = rearrange(context, merge)  # (B*K, R*n, D)
        out = self.cross_attn(x, context)  # (B*K, n, D)
        back = "(b k) n d -> b (n k) d" if self.bug == "chunks-interleaved" else "(b k) n d -> b (k n) d"
        out = rearrange(out, back, k=n // chunk_size)  # (B, T, D)
        return F.pad(out, (0, 0, causal_padding, -causal_padding), value=0.)  # (B, T, D)


class DecoderBlock(nn.Module):
    def __init__(self, dim, heads=4, bug=""):
        super().__init__()
        self.cca = ChunkedCrossAttention(dim, heads, bug)
        self.ff = nn.Sequential(RMSNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x, retrieved):
        x = self.cca(x, retrieved) + x
        return self.ff(x) + x


BUGS = ("chunks-interleaved",)
TWINS = ("neighbours-merged-n-r",)
DIMS = ("B=2 T=15 D=32 H=4",)


def build(bug="", B=2, T=15, D=32, H=4):
    torch.manual_seed(0)
    chunk, retrieved = (3 if T % 3 == 0 else 2), 2
    model = DecoderBlock(D, H, bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, T // chunk, retrieved, chunk, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
