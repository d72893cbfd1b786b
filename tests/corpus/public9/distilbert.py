"""huggingface/transformers, src/transformers/models/distilbert/modeling_distilbert.py
(``MultiHeadSelfAttention.forward``; https://github.com/huggingface/transformers/blob/main/src/transformers/
models/distilbert/modeling_distilbert.py): ``shape()``/``unshape()`` closures over ``view(bs, -1, n_heads,
dim_per_head).transpose(1, 2)``, the queries scaled before the product, and the padding mask laid out as
``mask_reshp = (bs, 1, 1, k_length)``, then ``(mask == 0).view(mask_reshp).expand_as(scores)`` and
``scores.masked_fill(mask, torch.finfo(scores.dtype).min)``.

Bugs (argument): ``mask-on-queries``: ``mask_reshp = (bs, 1, q_length, 1)``, the padding laid on the queries
(the mistake of the attention-mask reports, e.g. huggingface/transformers issue #542's "mask applied on the
wrong dimension"; expanded, the mask hides whole query rows while every query still reads the padding);
``unshape-no-transpose``: the context ``[bs, H, T, d]`` viewed straight to ``[bs, T, D]``. Twin (argument):
``mask-broadcast``: the same mask left ``(bs, 1, 1, k_length)`` and broadcast by ``masked_fill`` itself."""

import sys

import torch
from torch import nn

BUGS = ("mask-on-queries", "unshape-no-transpose")
TWINS = ("mask-broadcast",)
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.dim, self.bug = n_heads, dim, bug
        self.q_lin, self.k_lin = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_lin, self.out_lin = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, query, key, value, mask):
        bs, q_length, dim = query.size()
        k_length = key.size(1)
        dim_per_head = self.dim // self.n_heads
        mask_reshp = (bs, 1, q_length, 1) if self.bug == "mask-on-queries" else (bs, 1, 1, k_length)

        def shape(x):
            return x.view(bs, -1, self.n_heads, dim_per_head).transpose(1, 2)  # (bs, H, T, d)

        def unshape(x):
            if self.bug == "unshape-no-transpose":
                return x.contiguous().view(bs, -1, self.n_heads * dim_per_head)  # bug: (bs, H·T, ...) regrouped
            return x.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * dim_per_head)  # (bs, T, D)

        q = shape(self.q_lin(query))  # (bs, H, T, d)
        k = shape(self.k_lin(key))  # (bs, H, T, d)
        v = shape(self.v_lin(value))  # (bs, H, T, d)
        q = q / dim_per_head**0.5
        scores = torch.matmul(q, k.transpose(2, 3))  # (bs, H, T, T)
        mask = (mask == 0).view(mask_reshp)  # (bs, 1, 1, T)
        if self.bug != "mask-broadcast":
            mask = mask.expand_as(scores)  # (bs, H, T, T), stride 0 where broadcast
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = nn.functional.softmax(scores, dim=-1)  # (bs, H, T, T)
        context = unshape(torch.matmul(weights, v))  # (bs, T, D)
        return self.out_lin(context)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    mask = torch.ones(B, T)
    mask[0, T - 2:] = 0  # the first sequence ends in two padding tokens
    return MultiHeadSelfAttention(D, H, bug), (x, x, x, mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
