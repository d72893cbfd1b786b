"""lucidrains/compressive-transformer-pytorch, compressive_transformer_pytorch/compressive_transformer_pytorch.py
(``SelfAttention.forward``, ``ConvCompress``, ``shift``, ``queue_fifo``, and ``CompressiveTransformer``'s
``pos_emb`` table): the Compressive Transformer's attention over compressed memories, memories and the current
segment. ``kv_input = torch.cat((cmem, mem, x), dim=1)``, ``to_kv`` split in two, heads split by ``reshape_dim(x,
-1, (-1, dim_h)).transpose(1, 2)``; ``einsum('bhid,bhjd->bhij')``; the relative positions ``pos_emb[:, -kv_len:]``
scored with ``einsum('bhid,hjd->bhij')`` and ``shift``-ed (pad ``i`` zero columns, flatten, re-view at ``i + j - 1``,
keep ``[..., :i, i - 1:]``); a causal mask ``ones(t, t + mem_len + cmem_len).triu_(diagonal=1 + total_mem_len)``
(each query sees every memory and the segment up to itself); ``softmax``; ``out.transpose(1, 2).reshape(b, t,
-1)``. Then the next memories: ``queue_fifo(mem, x, length=mem_len, dim=1)`` (the oldest tokens fall out), the
fallen-out tokens padded at the front to a multiple of ``cmem_ratio`` and compressed by ``ConvCompress``
(``Conv1d(dim, dim, ratio, stride=ratio)`` between two ``transpose(1, 2)``), the compressed memory queued the same
way (``split_at_index(1, -cmem_len, ...)``).

Bugs: ``kv-cat-order-swapped``: ``cat((x, mem, cmem), dim=1)`` (the segment in front of its memories while the
causal mask and the relative positions assume the memories first: queries see segment tokens after them and lose
the oldest memories); ``causal-mask-no-mem-offset``: ``triu_(diagonal=1)`` (the mask built as if there were no
memory: query ``i`` sees only the first ``i + 1`` keys, which are memories, and none of its own segment);
``compress-reshape-for-transpose``: ``mem.reshape(b, d, n)`` in ``ConvCompress`` (the ``[b, n, d]`` memories
re-read as ``[b, d, n]`` without moving the axes: the convolution runs over a mix of tokens and features);
``pad-by-remainder``: ``old_mem_padding = old_mem.shape[1] % cmem_ratio`` as the released code has it (the pad is
the remainder, not what is missing to the next multiple: with 5 fallen-out tokens and ratio 4 it pads 1, and the
stride-4 convolution drops the last 2 tokens uncompressed; at 4 tokens it pads 0 and is right)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def reshape_dim(t, dim, split_dims):
    shape = list(t.shape)
    dim = (dim + len(shape)) % len(shape)
    shape[dim:dim + 1] = split_dims
    return t.reshape(shape)


def split_at_index(dim, index, t):
    pre_slices = (slice(None),) * dim
    return t[(*pre_slices, slice(None, index))], t[(*pre_slices, slice(index, None))]


def queue_fifo(*args, length, dim=-2):
    queue = torch.cat(args, dim=dim)
    return split_at_index(dim, -length, queue)


def shift(x):
    *_, i, j = x.shape
    zero_pad = torch.zeros((*_, i, i))
    x = torch.cat([x, zero_pad], -1)                                          # (b, h, i, j + i)
    l = i + j - 1  # noqa: E741
    x = x.view(*_, -1)                                                        # (b, h, i·(j + i))
    zero_pad = torch.zeros(*_, -x.size(-1) % l)
    shifted = torch.cat([x, zero_pad], -1).view(*_, -1, l)                    # (b, h, ·, i + j - 1)
    return shifted[..., :i, i - 1:]                                           # (b, h, i, j)


class ConvCompress(nn.Module):
    def __init__(self, dim, ratio=4, bug=""):
        super().__init__()
        self.conv, self.bug = nn.Conv1d(dim, dim, ratio, stride=ratio), bug

    def forward(self, mem):
        if self.bug == "compress-reshape-for-transpose":
            mem = mem.reshape(mem.shape[0], mem.shape[2], mem.shape[1])
        else:
            mem = mem.transpose(1, 2)                                         # (b, d, n)
        compressed_mem = self.conv(mem)                                       # (b, d, n / ratio)
        return compressed_mem.transpose(1, 2)                                 # (b, n / ratio, d)


class SelfAttention(nn.Module):
    def __init__(self, dim, seq_len, mem_len, cmem_len, cmem_ratio=4, heads=8, bug=""):
        super().__init__()
        self.heads, self.dim_head, self.bug = heads, dim // heads, bug
        self.seq_len, self.mem_len, self.cmem_len, self.cmem_ratio = seq_len, mem_len, cmem_len, cmem_ratio
        self.scale = self.dim_head ** (-0.5)
        self.compress_mem_fn = ConvCompress(dim, cmem_ratio, bug)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, mem, cmem, pos_emb):
        b, t, _, dim_h = *x.shape, self.dim_head
        mem_len, cmem_len = mem.shape[1], cmem.shape[1]
        q = self.to_q(x)
        if self.bug == "kv-cat-order-swapped":
            kv_input = torch.cat((x, mem, cmem), dim=1)
        else:
            kv_input = torch.cat((cmem, mem, x), dim=1)                       # (b, n + m + t, e)
        kv_len = kv_input.shape[1]
        k, v = self.to_kv(kv_input).chunk(2, dim=-1)
        merge_heads = lambda x: reshape_dim(x, -1, (-1, dim_h)).transpose(1, 2)   # noqa: E731  (b, h, ·, d)
        q, k, v = map(merge_heads, (q, k, v))
        dots = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale             # (b, h, t, n + m + t)
        mask_value = -torch.finfo(dots.dtype).max
        pos_emb = pos_emb[:, -kv_len:]                                        # (h, n + m + t, d)
        pos_dots = torch.einsum("bhid,hjd->bhij", q, pos_emb) * self.scale    # (b, h, t, n + m + t)
        dots = dots + shift(pos_dots)
        total_mem_len = mem_len + cmem_len
        diagonal = 1 if self.bug == "causal-mask-no-mem-offset" else 1 + total_mem_len
        mask = torch.ones(t, t + total_mem_len).triu_(diagonal=diagonal).bool()
        dots.masked_fill_(mask[None, None, ...], mask_value)
        attn = dots.softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v)                        # (b, h, t, d)
        out = out.transpose(1, 2).reshape(b, t, -1)                           # (b, t, h·d)
        logits = self.to_out(out)
        old_mem, new_mem = queue_fifo(mem, x, length=self.mem_len, dim=1)     # (b, t, e), (b, m, e)
        if self.bug == "pad-by-remainder":
            old_mem_padding = old_mem.shape[1] % self.cmem_ratio
        else:
            old_mem_padding = -old_mem.shape[1] % self.cmem_ratio
        if old_mem_padding != 0:
            old_mem = F.pad(old_mem, (0, 0, old_mem_padding, 0), value=0.0)   # (b, t + pad, e)
        compressed_mem = self.compress_mem_fn(old_mem)                        # (b, (t + pad) / ratio, e)
        _, new_cmem = split_at_index(1, -self.cmem_len, torch.cat((cmem, compressed_mem), dim=1))   # (b, n, e)
        return logits, new_mem, new_cmem


class CompressiveLayer(nn.Module):
    """``CompressiveTransformer``'s position table ``(heads, seq_len + mem_len + cmem_len, dim_head)`` cut to the
    memories and segment at hand, and one attention layer."""

    def __init__(self, dim, heads, seq_len, mem_len, cmem_len, bug=""):
        super().__init__()
        self.seq_len = seq_len
        self.pos_emb = nn.Parameter(torch.randn(heads, seq_len + mem_len + cmem_len, dim // heads) * 0.1)
        self.attn = SelfAttention(dim, seq_len, mem_len, cmem_len, heads=heads, bug=bug)

    def forward(self, x, mem, cmem):
        t = x.shape[1]
        total_len = mem.shape[1] + cmem.shape[1] + self.seq_len
        pos_emb = self.pos_emb[:, (self.seq_len - t):total_len]
        return self.attn(x, mem, cmem, pos_emb)


BUGS = ("kv-cat-order-swapped", "causal-mask-no-mem-offset", "compress-reshape-for-transpose", "pad-by-remainder")
TWINS = ()
DIMS = ("B=2 T=5 S=6 N=3 D=32 H=4",)   # (S: the memories, N: the compressed memories)
EQUAL = {DIMS[0]: "B=4 T=4 S=4 N=4 D=32 H=4"}


def build(bug="", B=2, T=5, S=6, N=3, D=32, H=4):  # noqa: N803
    """A full segment ``x (B, T, D)`` with a full memory ``(B, S, D)`` and compressed memory ``(B, N, D)``."""
    torch.manual_seed(0)
    model = CompressiveLayer(D, H, seq_len=T, mem_len=S, cmem_len=N, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, N, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
