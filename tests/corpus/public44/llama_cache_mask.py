"""meta-llama/llama, llama/model.py (``Attention.forward`` with its ``cache_k``/``cache_v``, ``Transformer.forward``),
main: a chunk of ``seqlen`` tokens at ``start_pos`` (a prefill of ``P`` tokens, then a chunk of ``T``): ``xq, xk,
xv`` viewed ``(bsz, seqlen, n_heads, head_dim)``, written into the cache by ``cache_k[:bsz, start_pos : start_pos +
seqlen] = xk``, keys and values read back as ``cache_k[:bsz, : start_pos + seqlen]``, heads moved by
``transpose(1, 2)``; the mask ``torch.full((seqlen, seqlen), -inf)``, ``torch.triu(mask, diagonal=1)`` and
``torch.hstack([torch.zeros((seqlen, start_pos)), mask])`` (the cached keys all visible, a triangle over the new
ones), added to ``matmul(xq, keys.transpose(2, 3)) / sqrt(head_dim)``, softmax, ``matmul(scores, values)``,
``transpose(1, 2).contiguous().view(bsz, seqlen, -1)``, ``wo``. Rotary embeddings are left out; the tokens enter
embedded.

Bug (a natural slip): ``mask-cache-last``: ``hstack([mask, zeros((seqlen, start_pos))])``: the triangle laid over the
cached keys and the new keys all visible (each new token reads the chunk's later tokens)."""

import math
import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, n_heads, max_batch_size, max_seq_len):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.cache_k = torch.zeros((max_batch_size, max_seq_len, n_heads, self.head_dim))
        self.cache_v = torch.zeros((max_batch_size, max_seq_len, n_heads, self.head_dim))

    def forward(self, x, start_pos, mask):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_heads, self.head_dim)                         # (B, T, H, d_k)
        xk = xk.view(bsz, seqlen, self.n_heads, self.head_dim)                         # (B, T, H, d_k)
        xv = xv.view(bsz, seqlen, self.n_heads, self.head_dim)                         # (B, T, H, d_k)
        self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen]                               # (B, P+T, H, d_k)
        values = self.cache_v[:bsz, : start_pos + seqlen]                             # (B, P+T, H, d_k)
        xq = xq.transpose(1, 2)                                                        # (B, H, T, d_k)
        keys = keys.transpose(1, 2)                                                    # (B, H, P+T, d_k)
        values = values.transpose(1, 2)                                                # (B, H, P+T, d_k)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)    # (B, H, T, P+T)
        if mask is not None:
            scores = scores + mask
        scores = torch.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)                                          # (B, H, T, d_k)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)            # (B, T, D)
        return self.wo(output)


class Transformer(nn.Module):
    def __init__(self, dim, n_heads, max_batch_size=4, max_seq_len=32, bug=""):
        super().__init__()
        self.bug = bug
        self.attention = Attention(dim, n_heads, max_batch_size, max_seq_len)
        self.norm = nn.LayerNorm(dim)

    def forward(self, h, start_pos):
        seqlen = h.shape[1]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"))
            mask = torch.triu(mask, diagonal=1)
            if self.bug == "mask-cache-last":
                mask = torch.hstack([mask, torch.zeros((seqlen, start_pos))]).type_as(h)   # (T, P+T)
            else:
                mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)   # (T, P+T)
        return h + self.attention(self.norm(h), start_pos, mask)


class PrefillThenChunk(nn.Module):
    """A prompt of P tokens, then a chunk of T more (the second call is the one a cache-aware mask serves)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, prompt, chunk):
        self.model(prompt, 0)
        return self.model(chunk, prompt.shape[1])


BUGS = ("mask-cache-last",)
TWINS = ()
DIMS = ("B=2 T=4 D=32 H=4",)


def build(bug="", B=2, T=4, D=32, H=4):
    torch.manual_seed(0)
    model = PrefillThenChunk(Transformer(D, H, bug=bug)).eval()
    return model, (torch.randn(B, 3, D), torch.randn(B, T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
