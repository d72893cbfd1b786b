"""meta-llama/llama, llama/model.py (``Attention.__init__``'s ``cache_k``/``cache_v`` buffers of
``(max_batch_size, max_seq_len, n_local_kv_heads, head_dim)`` and ``Attention.forward``:
``self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk``, ``keys = self.cache_k[:bsz, : start_pos +
seqlen]``; https://github.com/meta-llama/llama/blob/main/llama/model.py): a static cache made for a larger
batch than the one written, a prefill with Llama's ``torch.full((seqlen, seqlen), -inf).triu(1)`` mask,
then one-token decode steps at ``start_pos``.

Bugs (argument): ``write-at-zero``: each step written at ``[:bsz, :seqlen]`` (``start_pos`` left out of the
write: the position transformers' ``StaticCache.update`` takes as ``cache_position``): the
decode step overwrites slot 0 and then reads slot ``start_pos``, never filled; ``merge-no-transpose``: the
heads merged by ``view(bsz, seqlen, -1)`` straight from ``(B, H, T, d)`` (FuxiCTR issue #30's class)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("write-at-zero", "merge-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


class Attention(nn.Module):
    def __init__(self, d, h, max_batch=4, max_seq=16, bug=""):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.wq, self.wk = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.wv, self.wo = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.register_buffer("cache_k", torch.zeros(max_batch, max_seq, h, self.hd), persistent=False)
        self.register_buffer("cache_v", torch.zeros(max_batch, max_seq, h, self.hd), persistent=False)

    def forward(self, x, start_pos, mask):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.h, self.hd)                        # (B, T, H, d)
        xk = self.wk(x).view(bsz, seqlen, self.h, self.hd)                        # (B, T, H, d)
        xv = self.wv(x).view(bsz, seqlen, self.h, self.hd)                        # (B, T, H, d)
        start, end = start_pos, start_pos + seqlen
        if self.bug == "write-at-zero":
            start, end = 0, seqlen                                                 # bug: start_pos forgotten
        self.cache_k[:bsz, start:end] = xk                                         # (B_max, L, H, d)
        self.cache_v[:bsz, start:end] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen]                            # (B, S, H, d)
        values = self.cache_v[:bsz, : start_pos + seqlen]                          # (B, S, H, d)
        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.hd)      # (B, H, T, S)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)                                     # (B, H, T, d)
        if self.bug == "merge-no-transpose":
            output = output.contiguous().view(bsz, seqlen, -1)                     # bug: (B, H·T·d) regrouped
        else:
            output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)    # (B, T, D)
        return self.wo(output)


class Decode(nn.Module):
    """A prefill of the prompt, then ``steps`` one-token steps fed the last output."""

    def __init__(self, attn, steps=3):
        super().__init__()
        self.attn, self.steps = attn, steps

    def forward(self, x):
        seqlen = x.shape[1]
        mask = torch.full((seqlen, seqlen), float("-inf")).triu(1)                 # (T, T)
        y = self.attn(x, 0, mask)
        for pos in range(seqlen, seqlen + self.steps):
            y = self.attn(y[:, -1:, :], pos, None)                                 # (B, 1, D)
        return y


def build(bug="", B=2, T=6, D=64, H=4):
    """--dims 'B=2 T=6 D=64 H=4': hidden states (B, T, D), a cache for 4 sequences of 16 tokens."""
    torch.manual_seed(0)
    return Decode(Attention(D, H, max_batch=max(4, B), bug=bug)).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
