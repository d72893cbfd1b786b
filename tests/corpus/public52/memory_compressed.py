"""lucidrains/memory-compressed-attention, memory_compressed_attention/memory_compressed_attention.py
(``ConvCompress``, ``MemoryCompressedAttention``; commit 0d2e2c9, 2020), the memory-compressed attention of Liu et al.
2018: ``to_qkv(x).chunk(3, dim=-1)``; keys and values padded on the left to a multiple of the compression factor
(``F.pad(t, (0, 0, padding, 0))``) and shortened by a strided ``Conv1d(dim, dim, cf, stride=cf, groups=heads)`` on
``mem.transpose(1, 2)`` (back by ``transpose(1, 2)``); a learned null key and value prepended
(``torch.cat((self.null_k, k), dim=1)``, expanded to the batch); heads by ``t.reshape(*t.shape[:2], h,
-1).transpose(1, 2)``; causal: ``mask_k`` the positions padded like the keys, ``reshape(-1, cf).max(dim=-1)`` (the
last position of each compressed block), ``mask_q[:, None] < mask_k[None, :]``, padded by one ``False`` for the null
key, filled into the scores before the softmax; ``out.transpose(1, 2).reshape(b, t, d)``, ``to_out``. (The public
file fills the mask after its softmax and with ``-float('-inf')``; here the order and sign are right.)

Bugs: ``mask-after-softmax``: the public file's own order, ``attn = dots.softmax(dim=-1)`` before
``dots.masked_fill_(mask, ...)``, so the causal mask is written and never read (every query sees the compressed
future); ``heads-view-no-transpose``: heads by ``t.reshape(b, h, t.shape[1], -1)`` without the transpose (each
"head" a slab of consecutive tokens' features)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F


class ConvCompress(nn.Module):
    def __init__(self, dim, ratio=4, groups=1):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, ratio, stride=ratio, groups=groups)

    def forward(self, mem):
        mem = mem.transpose(1, 2)                                                    # (b, d, t)
        compressed_mem = self.conv(mem)                                              # (b, d, t / cf)
        return compressed_mem.transpose(1, 2)                                        # (b, t / cf, d)


class MemoryCompressedAttention(nn.Module):
    def __init__(self, dim, heads=8, causal=True, compression_factor=4, bug=""):
        super().__init__()
        self.heads, self.causal, self.bug = heads, causal, bug
        self.compression_factor = compression_factor
        self.compress_fn = ConvCompress(dim, compression_factor, groups=heads)
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.null_k = nn.Parameter(torch.randn(1, 1, dim))
        self.null_v = nn.Parameter(torch.randn(1, 1, dim))

    def forward(self, x):
        b, t, d, h, cf = *x.shape, self.heads, self.compression_factor
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)                                    # (b, t, d) each
        padding = (cf - t % cf) % cf
        if padding != 0:
            k, v = (F.pad(u, (0, 0, padding, 0)) for u in (k, v))                    # (b, t + pad, d)
        k, v = (self.compress_fn(u) for u in (k, v))                                 # (b, m, d)
        k = torch.cat((self.null_k.expand(b, -1, -1), k), dim=1)                     # (b, 1 + m, d)
        v = torch.cat((self.null_v.expand(b, -1, -1), v), dim=1)
        if self.bug == "heads-view-no-transpose":
            q, k, v = (u.reshape(b, h, u.shape[1], -1) for u in (q, k, v))           # (b, h, n, d/h) wrong
        else:
            q, k, v = (u.reshape(*u.shape[:2], h, -1).transpose(1, 2) for u in (q, k, v))   # (b, h, n, d/h)
        dots = torch.einsum("bhid,bhjd->bhij", q, k) * (d // h) ** -0.5              # (b, h, t, 1 + m)
        if self.bug == "mask-after-softmax":
            attn = dots.softmax(dim=-1)
        if self.causal:
            mask_q = mask_k = torch.arange(t)
            if padding != 0:
                mask_k = F.pad(mask_k, (padding, 0))
            mask_k, _ = mask_k.reshape(-1, cf).max(dim=-1)                           # (m,)
            mask = mask_q[:, None] < mask_k[None, :]                                 # (t, m)
            mask = F.pad(mask, (1, 0), value=False)                                  # (t, 1 + m)
            dots.masked_fill_(mask[None, None, ...], float("-inf"))
        if self.bug != "mask-after-softmax":
            attn = dots.softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v)                               # (b, h, t, d/h)
        out = out.transpose(1, 2).reshape(b, t, d)                                   # (b, t, d)
        return self.to_out(out)


BUGS = ("mask-after-softmax", "heads-view-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MemoryCompressedAttention(D, heads=H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
